package hud

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Methods of the control channel, and the tunnel preface.
const (
	MethodHello      = "hello"
	MethodTasksList  = "tasks.list"
	MethodTasksStart = "tasks.start"
	MethodTasksGrade = "tasks.grade"
	MethodCancel     = "tasks.cancel"
	MethodBye        = "bye"
	MethodTunnelOpen = "tunnel.open"
)

// Capability protocols berth serves.
const (
	ProtocolMCP = "mcp/2025-11-25"
	ProtocolSSH = "ssh/2"
)

// JSON-RPC error codes as HUD's server uses them.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600 // a session problem, or no task in progress
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602 // bad params, unknown task
	CodeServerError    = -32000 // the handler failed
)

// Error is a JSON-RPC error object; handlers return it to choose the code.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("hud rpc error %d: %s", e.Code, e.Message) }

// Errorf makes an *Error with code.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Request is one JSON-RPC request frame. ID is absent on notifications.
type Request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// Response is one JSON-RPC response frame.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// Binding is one capability in a hello reply: the address of something
// serving protocol, and what a client needs to use it.
type Binding struct {
	Name     string         `json:"name"`
	Protocol string         `json:"protocol"`
	URL      string         `json:"url"`
	Params   map[string]any `json:"params"`
}

// EnvInfo names the environment in a hello reply.
type EnvInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Manifest is the hello reply.
type Manifest struct {
	SessionID string    `json:"session_id"`
	Env       EnvInfo   `json:"env"`
	Bindings  []Binding `json:"bindings"`
}

// TaskEntry is one task in a tasks.list reply. Args is the JSON Schema of
// the task's arguments.
type TaskEntry struct {
	ID          string         `json:"id"`
	Description string         `json:"description"`
	Args        map[string]any `json:"args"`
}

// NoArgs is the args schema of a task that takes none, as HUD's pydantic
// schema of an empty signature reads.
func NoArgs() map[string]any {
	return map[string]any{"properties": map[string]any{}, "type": "object", "additionalProperties": false}
}

// Grade is a tasks.grade reply in the shape of HUD's EvaluationResult
// (reward renamed score on the wire).
type Grade struct {
	Score     float64        `json:"score"`
	Done      bool           `json:"done"`
	Content   *string        `json:"content"`
	Info      map[string]any `json:"info"`
	IsError   bool           `json:"isError"`
	Subscores []any          `json:"subscores"`
}

// pyRepr quotes s as Python's repr of a str does, so that error messages
// read as HUD's server writes them ("unknown task: 'x'").
func pyRepr(s string) string {
	q := "'"
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = `"`
	}
	var b strings.Builder
	b.WriteString(q)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case string(r) == q:
			b.WriteString(`\` + q)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteString(q)
	return b.String()
}

// Repr is pyRepr for handlers that build HUD's messages.
func Repr(s string) string { return pyRepr(s) }
