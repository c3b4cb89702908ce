package sandbox

import (
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// The values shared with drivers live in package driver and the error
// classes in package errdefs; these aliases are the names callers use.
type (
	Spec         = driver.Spec
	Build        = driver.Build
	Resources    = driver.Resources
	Network      = driver.Network
	PullPolicy   = driver.PullPolicy
	NetworkMode  = driver.NetworkMode
	Command      = driver.Command
	Signal       = driver.Signal
	Info         = driver.Info
	FileInfo     = driver.FileInfo
	FileType     = driver.FileType
	Capabilities = driver.Capabilities
	Limits       = driver.Limits
	ResourceMode = driver.ResourceMode
	Class        = errdefs.Class
	Error        = errdefs.Error
)

// Re-exported constants and values; see packages driver and errdefs for their meaning.
const (
	NetworkNone      = driver.NetworkNone
	NetworkPublic    = driver.NetworkPublic
	NetworkAllowlist = driver.NetworkAllowlist

	SIGTERM = driver.SIGTERM
	SIGKILL = driver.SIGKILL

	FileRegular = driver.FileRegular
	FileDir     = driver.FileDir
	FileSymlink = driver.FileSymlink
	FileOther   = driver.FileOther

	ResourcesLimits   = driver.ResourcesLimits
	ResourcesRequests = driver.ResourcesRequests
	ResourcesBoth     = driver.ResourcesBoth

	Unknown           = errdefs.Unknown
	NotFound          = errdefs.NotFound
	AlreadyExists     = errdefs.AlreadyExists
	InvalidArgument   = errdefs.InvalidArgument
	Unauthenticated   = errdefs.Unauthenticated
	ResourceExhausted = errdefs.ResourceExhausted
	Unavailable       = errdefs.Unavailable
	DeadlineExceeded  = errdefs.DeadlineExceeded
	NotSupported      = errdefs.NotSupported

	DefaultTTL = driver.DefaultTTL
)

// The error class sentinels; errors.Is(err, sandbox.ErrNotFound) and
// errors.Is(err, errdefs.ErrNotFound) are the same test.
var (
	ErrNotFound          = errdefs.ErrNotFound
	ErrAlreadyExists     = errdefs.ErrAlreadyExists
	ErrInvalidArgument   = errdefs.ErrInvalidArgument
	ErrUnauthenticated   = errdefs.ErrUnauthenticated
	ErrResourceExhausted = errdefs.ErrResourceExhausted
	ErrUnavailable       = errdefs.ErrUnavailable
	ErrDeadlineExceeded  = errdefs.ErrDeadlineExceeded
	ErrNotSupported      = errdefs.ErrNotSupported
)

// Helpers re-exported from package errdefs.
var (
	ClassOf        = errdefs.ClassOf
	Errorf         = errdefs.Errorf
	Classify       = errdefs.Classify
	IgnoreNotFound = errdefs.IgnoreNotFound
	Retryable      = errdefs.Retryable
	RetryAfterOf   = errdefs.RetryAfterOf
	IsPermanent    = errdefs.IsPermanent
	WithRetryAfter = errdefs.WithRetryAfter
	WithPermanent  = errdefs.WithPermanent

	HTTPStatus        = errdefs.HTTPStatus
	ClassOfHTTPStatus = errdefs.ClassOfHTTPStatus
	RetryAfterHeader  = errdefs.RetryAfterHeader
	ValidateLabels    = driver.ValidateLabels
	ParseLabel        = driver.ParseLabel
	MatchLabels       = driver.MatchLabels
)
