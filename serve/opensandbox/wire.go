package opensandbox

import (
	"encoding/json"
	"net/http"
	"time"
)

// Ports and headers of the protocol.
const (
	// ExecdPort is execd's port inside an OpenSandbox sandbox: the port the
	// SDKs ask the endpoint of.
	ExecdPort = 44772
	// EgressPort is the egress sidecar's port; the SDKs ask its endpoint
	// at every create and connect.
	EgressPort = 18080
	// APIKeyHeader carries the lifecycle API key.
	APIKeyHeader = "OPEN-SANDBOX-API-KEY"
	// AccessTokenHeader carries execd's per-sandbox access token; the
	// endpoint lookup hands it out in Endpoint.Headers. A secret.
	AccessTokenHeader = "X-EXECD-ACCESS-TOKEN"
	// TailCursorHeader is the logs call's next cursor.
	TailCursorHeader = "EXECD-COMMANDS-TAIL-CURSOR"
	// DroppedHeader is berth's addition to the logs answer: how many bytes
	// from the cursor asked for are no longer kept (the answer starts
	// that much later); "0" when none. Upstream's spec has no such field:
	// its execd keeps all output in a file in the sandbox.
	DroppedHeader = "X-Berth-Dropped-Bytes"
)

// Lifecycle states a sandbox reports (status.state).
const (
	StatePending = "Pending"
	StateRunning = "Running"
	StateFailed  = "Failed"
)

// ImageSpec names a container image.
type ImageSpec struct {
	URI  string     `json:"uri"`
	Auth *ImageAuth `json:"auth,omitempty"`
}

// ImageAuth is a registry credential; never echoed or logged.
type ImageAuth struct {
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// Platform is a scheduling constraint.
type Platform struct {
	OS   string `json:"os"`
	Arch string `json:"arch"`
}

// NetworkRule is one egress rule.
type NetworkRule struct {
	Action string `json:"action"`
	Target string `json:"target"`
}

// NetworkPolicy is the egress policy of a sandbox.
type NetworkPolicy struct {
	DefaultAction string        `json:"defaultAction,omitempty"`
	Egress        []NetworkRule `json:"egress,omitempty"`
}

// CreateRequest is the body of POST /v1/sandboxes. Fields the server does
// not know are ignored, as upstream ignores them.
type CreateRequest struct {
	Image      *ImageSpec `json:"image"`
	SnapshotID string     `json:"snapshotId"`
	// Timeout is the sandbox's life in seconds; null or absent asks for no
	// expiry, which upstream allows and berth serve bounds by its maximum.
	Timeout          *float64          `json:"timeout"`
	ResourceLimits   map[string]string `json:"resourceLimits"`
	ResourceRequests map[string]string `json:"resourceRequests"`
	Env              map[string]string `json:"env"`
	Metadata         map[string]string `json:"metadata"`
	Entrypoint       []string          `json:"entrypoint"`
	NetworkPolicy    *NetworkPolicy    `json:"networkPolicy"`
	Volumes          []json.RawMessage `json:"volumes"`
	Platform         *Platform         `json:"platform"`
	Extensions       map[string]string `json:"extensions"`
}

// Status is a sandbox's lifecycle status.
type Status struct {
	State            string     `json:"state"`
	Reason           string     `json:"reason,omitempty"`
	Message          string     `json:"message,omitempty"`
	LastTransitionAt *time.Time `json:"lastTransitionAt,omitempty"`
}

// Sandbox is the Sandbox schema (GET, list); the create answer is the same
// without Image.
type Sandbox struct {
	ID         string            `json:"id"`
	Image      *ImageSpec        `json:"image,omitempty"`
	Status     Status            `json:"status"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	Extensions map[string]string `json:"extensions,omitempty"`
	Entrypoint []string          `json:"entrypoint"`
	ExpiresAt  *time.Time        `json:"expiresAt,omitempty"`
	CreatedAt  time.Time         `json:"createdAt"`
}

// Pagination is a list's page information.
type Pagination struct {
	Page        int  `json:"page"`
	PageSize    int  `json:"pageSize"`
	TotalItems  int  `json:"totalItems"`
	TotalPages  int  `json:"totalPages"`
	HasNextPage bool `json:"hasNextPage"`
}

// ListResponse is the body of GET /v1/sandboxes.
type ListResponse struct {
	Items      []Sandbox  `json:"items"`
	Pagination Pagination `json:"pagination"`
}

// Endpoint is where a port of a sandbox is reached: host[:port]/path
// without a scheme, and the headers calls must carry.
type Endpoint struct {
	Endpoint string            `json:"endpoint"`
	Headers  map[string]string `json:"headers,omitempty"`
}

// RenewRequest is the body of POST /v1/sandboxes/{id}/renew-expiration.
type RenewRequest struct {
	ExpiresAt time.Time `json:"expiresAt"`
}

// RenewResponse answers it.
type RenewResponse struct {
	ExpiresAt time.Time `json:"expiresAt"`
}

// ErrorResponse is both APIs' error body.
type ErrorResponse struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes berth answers with; the lifecycle ones follow upstream's
// "DOMAIN::WHAT" form, execd's are upstream's own.
const (
	CodeMissingAPIKey    = "MISSING_API_KEY"
	CodeInvalidAPIKey    = "INVALID_API_KEY"
	CodeInvalidParameter = "SANDBOX::INVALID_PARAMETER"
	CodeNotFound         = "SANDBOX::SANDBOX_NOT_FOUND"
	CodeNotSupported     = "SANDBOX::NOT_SUPPORTED"
	CodeQuota            = "SANDBOX::QUOTA_EXCEEDED"
	CodeUnavailable      = "SANDBOX::UNAVAILABLE"
	CodeInternal         = "SANDBOX::INTERNAL_ERROR"
	CodeTooLarge         = "SANDBOX::REQUEST_TOO_LARGE"

	CodeInvalidRequest   = "INVALID_REQUEST_BODY"
	CodeMissingQuery     = "MISSING_QUERY"
	CodeRuntimeError     = "RUNTIME_ERROR"
	CodeInvalidFile      = "INVALID_FILE"
	CodeInvalidMetadata  = "INVALID_FILE_METADATA"
	CodeFileNotFound     = "FILE_NOT_FOUND"
	CodeExecdUnsupported = "NOT_SUPPORTED"
)

// RunCommandRequest is the body of POST /command.
type RunCommandRequest struct {
	Command    string `json:"command"`
	Cwd        string `json:"cwd"`
	Background bool   `json:"background"`
	// Timeout in milliseconds; 0 means none.
	Timeout int64             `json:"timeout"`
	UID     *uint32           `json:"uid"`
	GID     *uint32           `json:"gid"`
	Envs    map[string]string `json:"envs"`
}

// Event types of the command stream.
const (
	EventInit     = "init"
	EventStdout   = "stdout"
	EventStderr   = "stderr"
	EventErr      = "error"
	EventComplete = "execution_complete"
	EventPing     = "ping"
)

// StreamEvent is one event of the command stream. Timestamp (unix ms) is
// always set: the Python SDK's model requires it.
type StreamEvent struct {
	Type          string      `json:"type"`
	Text          string      `json:"text,omitempty"`
	ExecutionTime int64       `json:"execution_time,omitempty"`
	Timestamp     int64       `json:"timestamp"`
	Error         *EventError `json:"error,omitempty"`
}

// EventError is an error event's body; for a command that exited non-zero
// EValue is the exit code in decimal.
type EventError struct {
	EName     string   `json:"ename"`
	EValue    string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// CommandStatus is the body of GET /command/status/{id}.
type CommandStatus struct {
	ID         string     `json:"id"`
	Content    string     `json:"content,omitempty"`
	Running    bool       `json:"running"`
	ExitCode   *int       `json:"exit_code,omitempty"`
	Error      string     `json:"error,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// FileMetadata is the metadata part of an upload.
type FileMetadata struct {
	Path  string `json:"path"`
	Owner string `json:"owner,omitempty"`
	Group string `json:"group,omitempty"`
	// Mode is octal written in decimal digits (755 means 0o755).
	Mode int `json:"mode,omitempty"`
}

// PolicyStatus is the egress sidecar's GET /policy answer.
type PolicyStatus struct {
	Status string        `json:"status"`
	Mode   string        `json:"mode"`
	Policy NetworkPolicy `json:"policy"`
}

// WriteJSON answers v with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError answers an ErrorResponse.
func WriteError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Del("Content-Length")
	w.Header().Del("Content-Disposition")
	WriteJSON(w, status, ErrorResponse{Code: code, Message: message})
}
