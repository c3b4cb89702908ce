package sandbox

import "github.com/berth-sh/berth/sandbox/types"

// The values shared with drivers live in package types (to avoid an import
// cycle with sandbox/driver); these aliases are the names callers use.
type (
	Spec         = types.Spec
	Build        = types.Build
	Resources    = types.Resources
	Network      = types.Network
	PullPolicy   = types.PullPolicy
	NetworkMode  = types.NetworkMode
	Command      = types.Command
	Signal       = types.Signal
	Info         = types.Info
	FileInfo     = types.FileInfo
	FileType     = types.FileType
	Capabilities = types.Capabilities
	ResourceMode = types.ResourceMode
	Class        = types.Class
	Error        = types.Error
)

// Re-exported constants and values; see package types for their meaning.
const (
	NetworkNone      = types.NetworkNone
	NetworkPublic    = types.NetworkPublic
	NetworkAllowlist = types.NetworkAllowlist

	SIGTERM = types.SIGTERM
	SIGKILL = types.SIGKILL

	FileRegular = types.FileRegular
	FileDir     = types.FileDir
	FileSymlink = types.FileSymlink
	FileOther   = types.FileOther

	ResourcesLimits   = types.ResourcesLimits
	ResourcesRequests = types.ResourcesRequests
	ResourcesBoth     = types.ResourcesBoth

	Unknown           = types.Unknown
	NotFound          = types.NotFound
	AlreadyExists     = types.AlreadyExists
	InvalidArgument   = types.InvalidArgument
	Unauthenticated   = types.Unauthenticated
	ResourceExhausted = types.ResourceExhausted
	Unavailable       = types.Unavailable
	DeadlineExceeded  = types.DeadlineExceeded
	NotSupported      = types.NotSupported

	DefaultTTL = types.DefaultTTL
)

// The error class sentinels; errors.Is(err, sandbox.ErrNotFound) and
// errors.Is(err, types.ErrNotFound) are the same test.
var (
	ErrNotFound          = types.ErrNotFound
	ErrAlreadyExists     = types.ErrAlreadyExists
	ErrInvalidArgument   = types.ErrInvalidArgument
	ErrUnauthenticated   = types.ErrUnauthenticated
	ErrResourceExhausted = types.ErrResourceExhausted
	ErrUnavailable       = types.ErrUnavailable
	ErrDeadlineExceeded  = types.ErrDeadlineExceeded
	ErrNotSupported      = types.ErrNotSupported
)

// Helpers re-exported from package types.
var (
	ClassOf        = types.ClassOf
	Errorf         = types.Errorf
	Classify       = types.Classify
	IgnoreNotFound = types.IgnoreNotFound
	Retryable      = types.Retryable
	RetryAfterOf   = types.RetryAfterOf
	IsPermanent    = types.IsPermanent
	WithRetryAfter = types.WithRetryAfter
	WithPermanent  = types.WithPermanent

	HTTPStatus        = types.HTTPStatus
	ClassOfHTTPStatus = types.ClassOfHTTPStatus
	RetryAfterHeader  = types.RetryAfterHeader
	ValidateLabels    = types.ValidateLabels
	ParseLabel        = types.ParseLabel
	MatchLabels       = types.MatchLabels
)
