package tbench2

import "github.com/berth-sh/berth/openenv"

// Action types.
const (
	ActionExec      = "exec"
	ActionWrite     = "write"
	ActionView      = "view"
	ActionWait      = "wait"
	ActionKill      = "kill"
	ActionWriteFile = "write_file"
	ActionEvaluate  = "evaluate"
	ActionClose     = "close"
)

// DefaultSession is the session id of actions that name none.
const DefaultSession = "tb2-session"

// Harness is info.harness of an evaluate that scored with the task's own
// tests/test.sh: the mark a trainer checks before trusting a reward.
const Harness = "tests/test.sh"

// Action is a Tbench2Action. It marshals as OpenEnv's Tbench2Env client
// sends it (every field, no metadata).
type Action struct {
	ActionType  string   `json:"action_type"`
	Command     string   `json:"command"`
	SessionID   *string  `json:"session_id"`
	Block       bool     `json:"block"`
	WaitSeconds *float64 `json:"wait_seconds"`
	FilePath    string   `json:"file_path"`
	Content     string   `json:"content"`
}

// Exec is a blocking exec action.
func Exec(command string) Action {
	return Action{ActionType: ActionExec, Command: command, Block: true}
}

// Observation is a Tbench2Observation without reward and done, which ride
// beside it on the wire.
type Observation struct {
	Instruction string         `json:"instruction"`
	Output      string         `json:"output"`
	Success     bool           `json:"success"`
	Error       string         `json:"error"`
	TaskID      string         `json:"task_id"`
	TaskPath    string         `json:"task_path"`
	SessionID   *string        `json:"session_id"`
	ActionType  string         `json:"action_type"`
	Info        map[string]any `json:"info"`
}

// State is a Tbench2State.
type State struct {
	EpisodeID      *string `json:"episode_id"`
	StepCount      int     `json:"step_count"`
	TaskID         string  `json:"task_id"`
	TaskPath       string  `json:"task_path"`
	SessionID      string  `json:"session_id"`
	TerminalReady  bool    `json:"terminal_ready"`
	LastActionType string  `json:"last_action_type"`
	LastCommand    string  `json:"last_command"`
	LastOutput     string  `json:"last_output"`
}

func zero(f float64) *float64 { return &f }

// The models, as pydantic declares Tbench2Action, Tbench2Observation and
// Tbench2State (base class fields first).
var (
	metadataField = func(of string) openenv.Field {
		return openenv.Field{Name: "metadata", Kind: openenv.Object, Factory: true, Description: "Additional metadata for the " + of}
	}
	actionModel = &openenv.Model{Title: "Tbench2Action", Description: "Action for interacting with a TB2 task session.", Fields: []openenv.Field{
		metadataField("action"),
		{Name: "action_type", Kind: openenv.String, Default: ActionExec},
		{Name: "command", Kind: openenv.String, Default: ""},
		{Name: "session_id", Kind: openenv.String, Nullable: true},
		{Name: "block", Kind: openenv.Boolean, Default: true},
		{Name: "wait_seconds", Kind: openenv.Number, Nullable: true},
		{Name: "file_path", Kind: openenv.String, Default: ""},
		{Name: "content", Kind: openenv.String, Default: ""},
	}}
	observationModel = &openenv.Model{Title: "Tbench2Observation", Description: "Observation returned from the TB2 environment.", Fields: []openenv.Field{
		{Name: "done", Kind: openenv.Boolean, Default: false, Description: "Whether the episode has terminated"},
		{Name: "reward", Nullable: true, Description: "Reward signal from the last action", Schema: map[string]any{
			"anyOf": []any{map[string]any{"type": "boolean"}, map[string]any{"type": "integer"}, map[string]any{"type": "number"}, map[string]any{"type": "null"}},
		}},
		metadataField("observation"),
		{Name: "instruction", Kind: openenv.String, Default: ""},
		{Name: "output", Kind: openenv.String, Default: ""},
		{Name: "success", Kind: openenv.Boolean, Default: true},
		{Name: "error", Kind: openenv.String, Default: ""},
		{Name: "task_id", Kind: openenv.String, Default: ""},
		{Name: "task_path", Kind: openenv.String, Default: ""},
		{Name: "session_id", Kind: openenv.String, Nullable: true},
		{Name: "action_type", Kind: openenv.String, Default: ""},
		{Name: "info", Kind: openenv.Object, Factory: true},
	}}
	stateModel = &openenv.Model{Title: "Tbench2State", Description: "Server-side state for a TB2 task.", AllowExtra: true, Fields: []openenv.Field{
		{Name: "episode_id", Kind: openenv.String, Nullable: true, Description: "Unique identifier for the current episode"},
		{Name: "step_count", Kind: openenv.Integer, Default: 0, GE: zero(0), Description: "Number of steps taken in the current episode"},
		{Name: "task_id", Kind: openenv.String, Default: ""},
		{Name: "task_path", Kind: openenv.String, Default: ""},
		{Name: "session_id", Kind: openenv.String, Default: ""},
		{Name: "terminal_ready", Kind: openenv.Boolean, Default: false},
		{Name: "last_action_type", Kind: openenv.String, Default: ""},
		{Name: "last_command", Kind: openenv.String, Default: ""},
		{Name: "last_output", Kind: openenv.String, Default: ""},
	}}
)

// Info is the environment's metadata and models for openenv.Options.
func Info() openenv.Info {
	return openenv.Info{
		Name:        "tbench2_env",
		Description: "Terminal-Bench 2 tasks (Harbor format) as exec and evaluate actions, one berth sandbox per session",
		Version:     "1.0.0",
		Action:      actionModel,
		Observation: observationModel,
		State:       stateModel,
	}
}
