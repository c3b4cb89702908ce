package results

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/berth-sh/berth/results/layout"
)

// Trajectory is an agent's run in Harbor's Agent Trajectory Interchange
// Format (ATIF, agent/trajectory.json): steps from the system, the user
// and the agent, the agent's tool calls and what they returned.
type Trajectory struct {
	SchemaVersion string `json:"schema_version"`
	SessionID     string `json:"session_id"`
	Agent         struct {
		Name      string `json:"name"`
		Version   string `json:"version"`
		ModelName string `json:"model_name"`
	} `json:"agent"`
	Notes        string          `json:"notes"`
	Steps        []Step          `json:"steps"`
	FinalMetrics json.RawMessage `json:"final_metrics"`
	// Truncated says how many steps were left out (MaxSteps).
	Truncated int `json:"-"`
}

// MaxSteps bounds the steps of a trajectory kept for a page.
const MaxSteps = 2000

// maxField bounds one message, argument or observation kept for a page.
const maxField = 64 << 10

// Step is one turn.
type Step struct {
	StepID      int             `json:"step_id"`
	Timestamp   string          `json:"timestamp"`
	Source      string          `json:"source"` // system, user or agent
	ModelName   string          `json:"model_name"`
	RawMessage  json.RawMessage `json:"message"`
	Reasoning   string          `json:"reasoning_content"`
	ToolCalls   []ToolCall      `json:"tool_calls"`
	Observation *struct {
		Results []struct {
			SourceCallID string          `json:"source_call_id"`
			Content      json.RawMessage `json:"content"`
		} `json:"results"`
	} `json:"observation"`
	Metrics json.RawMessage `json:"metrics"`
}

// ToolCall is one action of the agent.
type ToolCall struct {
	ID        string          `json:"tool_call_id"`
	Function  string          `json:"function_name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Message is the step's text (a string, or content parts shown as JSON).
func (s *Step) Message() string { return clip(jsonText(s.RawMessage)) }

// Command is the shell command a tool call ran, when its arguments hold
// one string field that names it (command, cmd, keystrokes, code), else "".
func (c *ToolCall) Command() string {
	var m map[string]json.RawMessage
	if json.Unmarshal(c.Arguments, &m) != nil {
		return ""
	}
	for _, k := range []string{"command", "cmd", "keystrokes", "code", "script"} {
		var s string
		if v, ok := m[k]; ok && json.Unmarshal(v, &s) == nil {
			return clip(s)
		}
	}
	return ""
}

// Args are the call's arguments as indented JSON.
func (c *ToolCall) Args() string { return clip(jsonText(c.Arguments)) }

// Observation is one result the environment returned.
type Observation struct {
	CallID  string
	Content string
}

// Observations lists the step's results.
func (s *Step) Observations() []Observation {
	if s.Observation == nil {
		return nil
	}
	out := make([]Observation, 0, len(s.Observation.Results))
	for _, r := range s.Observation.Results {
		out = append(out, Observation{CallID: r.SourceCallID, Content: clip(jsonText(r.Content))})
	}
	return out
}

// MetricsText is the step's metrics as indented JSON.
func (s *Step) MetricsText() string { return clip(jsonText(s.Metrics)) }

func clip(s string) string {
	if len(s) <= maxField {
		return s
	}
	// Cut on a rune boundary.
	cut := maxField
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "\n[... " + sizeString(int64(len(s)-cut)) + " more not shown]"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

func parseTrajectory(txt *Text) (*Trajectory, string) {
	if txt.Truncated {
		return nil, layout.TrajectoryFile + " is " + sizeString(txt.Size) + ", larger than " + sizeString(MaxTrajectoryBytes) + "; not parsed"
	}
	var t Trajectory
	if err := json.Unmarshal(bytes.TrimSpace(txt.Data), &t); err != nil {
		return nil, layout.TrajectoryFile + ": not ATIF JSON: " + err.Error()
	}
	if len(t.Steps) > MaxSteps {
		t.Truncated = len(t.Steps) - MaxSteps
		t.Steps = t.Steps[:MaxSteps]
	}
	return &t, ""
}

// sizeString is a byte count for people.
func sizeString(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, unit := float64(n)/1024, 0
	for v >= 1024 && unit < 4 {
		v /= 1024
		unit++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[unit])
}

// SizeString is a byte count for people (12 B, 3.4 MiB).
func SizeString(n int64) string { return sizeString(n) }
