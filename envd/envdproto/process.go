package envdproto

// Procedures of the process.Process service.
const (
	ProcessService       = "process.Process"
	ProcedureStart       = "/process.Process/Start"
	ProcedureConnect     = "/process.Process/Connect"
	ProcedureList        = "/process.Process/List"
	ProcedureSendInput   = "/process.Process/SendInput"
	ProcedureSendSignal  = "/process.Process/SendSignal"
	ProcedureCloseStdin  = "/process.Process/CloseStdin"
	ProcedureUpdate      = "/process.Process/Update"
	ProcedureStreamInput = "/process.Process/StreamInput"
)

// Signal is the process.Signal enum, by name.
type Signal string

// Signal values.
const (
	SignalUnspecified Signal = "SIGNAL_UNSPECIFIED"
	SignalSIGTERM     Signal = "SIGNAL_SIGTERM"
	SignalSIGKILL     Signal = "SIGNAL_SIGKILL"
)

var signalNames = map[int]string{0: string(SignalUnspecified), 15: string(SignalSIGTERM), 9: string(SignalSIGKILL)}

// UnmarshalJSON accepts the name or the number of the enum value.
func (s *Signal) UnmarshalJSON(data []byte) error {
	v, err := unmarshalEnum(data, signalNames)
	*s = Signal(v)
	return err
}

// ProcessConfig is what was started.
type ProcessConfig struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args,omitempty"`
	Envs map[string]string `json:"envs,omitempty"`
	Cwd  *string           `json:"cwd,omitempty"`
}

// PTY asks for a pseudo-terminal of the given size.
type PTY struct {
	Size *PTYSize `json:"size,omitempty"`
}

// PTYSize is a terminal size.
type PTYSize struct {
	Cols uint32 `json:"cols"`
	Rows uint32 `json:"rows"`
}

// ProcessSelector names a process by pid or by tag (a oneof).
type ProcessSelector struct {
	PID *uint32 `json:"pid,omitempty"`
	Tag *string `json:"tag,omitempty"`
}

// SelectPID returns a selector for pid.
func SelectPID(pid int) *ProcessSelector {
	p := uint32(pid)
	return &ProcessSelector{PID: &p}
}

// StartRequest starts a process.
type StartRequest struct {
	Process *ProcessConfig `json:"process,omitempty"`
	PTY     *PTY           `json:"pty,omitempty"`
	Tag     *string        `json:"tag,omitempty"`
	// Stdin keeps the process's stdin open for SendInput. Absent means true
	// (older SDKs); current SDKs send false unless asked.
	Stdin *bool `json:"stdin,omitempty"`
}

// ConnectRequest attaches to a running process.
type ConnectRequest struct {
	Process *ProcessSelector `json:"process,omitempty"`
}

// ProcessEvent is one event of a Start or Connect stream (a oneof).
type ProcessEvent struct {
	Start     *StartEvent `json:"start,omitempty"`
	Data      *DataEvent  `json:"data,omitempty"`
	End       *EndEvent   `json:"end,omitempty"`
	Keepalive *KeepAlive  `json:"keepalive,omitempty"`
}

// StartEvent is always the first event of a stream.
type StartEvent struct {
	PID uint32 `json:"pid"`
}

// DataEvent carries one chunk of output (a oneof).
type DataEvent struct {
	Stdout []byte `json:"stdout,omitempty"`
	Stderr []byte `json:"stderr,omitempty"`
	PTY    []byte `json:"pty,omitempty"`
}

// EndEvent is the last event of a stream whose process ended.
type EndEvent struct {
	ExitCode int32   `json:"exitCode"`
	Exited   bool    `json:"exited"`
	Status   string  `json:"status"`
	Error    *string `json:"error,omitempty"`
}

// KeepAlive is sent while a stream is idle.
type KeepAlive struct{}

// StartResponse is one message of the Start stream.
type StartResponse struct {
	Event *ProcessEvent `json:"event,omitempty"`
}

// ConnectResponse is one message of the Connect stream.
type ConnectResponse struct {
	Event *ProcessEvent `json:"event,omitempty"`
}

// ListRequest lists running processes.
type ListRequest struct{}

// ProcessInfo describes a running process.
type ProcessInfo struct {
	Config *ProcessConfig `json:"config,omitempty"`
	PID    uint32         `json:"pid"`
	Tag    *string        `json:"tag,omitempty"`
}

// ListResponse answers List.
type ListResponse struct {
	Processes []ProcessInfo `json:"processes"`
}

// ProcessInput is input for a process (a oneof).
type ProcessInput struct {
	Stdin []byte `json:"stdin,omitempty"`
	PTY   []byte `json:"pty,omitempty"`
}

// SendInputRequest writes to a process's stdin.
type SendInputRequest struct {
	Process *ProcessSelector `json:"process,omitempty"`
	Input   *ProcessInput    `json:"input,omitempty"`
}

// SendInputResponse answers SendInput.
type SendInputResponse struct{}

// SendSignalRequest signals a process.
type SendSignalRequest struct {
	Process *ProcessSelector `json:"process,omitempty"`
	Signal  Signal           `json:"signal,omitempty"`
}

// SendSignalResponse answers SendSignal.
type SendSignalResponse struct{}

// CloseStdinRequest closes a process's stdin.
type CloseStdinRequest struct {
	Process *ProcessSelector `json:"process,omitempty"`
}

// CloseStdinResponse answers CloseStdin.
type CloseStdinResponse struct{}

// UpdateRequest resizes a process's terminal.
type UpdateRequest struct {
	Process *ProcessSelector `json:"process,omitempty"`
	PTY     *PTY             `json:"pty,omitempty"`
}

// UpdateResponse answers Update.
type UpdateResponse struct{}
