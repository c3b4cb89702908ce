package terminus

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/harbor/agent/llm"
)

// TurnMetrics are one model call's numbers, in agent_result.metadata.turns.
type TurnMetrics struct {
	Turn              int     `json:"turn"`
	PromptTokens      int64   `json:"prompt_tokens"`
	CompletionTokens  int64   `json:"completion_tokens"`
	CachedTokens      int64   `json:"cached_tokens"`
	FinishReason      string  `json:"finish_reason,omitempty"`
	Attempts          int     `json:"attempts"`           // HTTP requests: 1 plus the retries
	GenerationSeconds float64 `json:"generation_seconds"` // the model call, retries included
	ToolSeconds       float64 `json:"tool_seconds"`       // typing, waiting and reading the terminal
	Commands          int     `json:"commands"`
	ParseError        string  `json:"parse_error,omitempty"`
}

// trajectory is the run in Harbor's ATIF (agent/trajectory.json).
type trajectory struct {
	Steps []atifStep
}

type atifStep struct {
	StepID      int             `json:"step_id"`
	Timestamp   string          `json:"timestamp"`
	Source      string          `json:"source"`
	ModelName   string          `json:"model_name,omitempty"`
	Message     string          `json:"message"`
	Reasoning   string          `json:"reasoning_content,omitempty"`
	ToolCalls   []atifToolCall  `json:"tool_calls,omitempty"`
	Observation *atifObs        `json:"observation,omitempty"`
	Metrics     json.RawMessage `json:"metrics,omitempty"`
}

type atifToolCall struct {
	ID        string `json:"tool_call_id"`
	Function  string `json:"function_name"`
	Arguments any    `json:"arguments"`
}

type atifObs struct {
	Results []atifResult `json:"results"`
}

type atifResult struct {
	Content string `json:"content"`
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// step records a system or user message.
func (a *Agent) step(source, msg string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.traj.Steps = append(a.traj.Steps, atifStep{StepID: len(a.traj.Steps) + 1, Timestamp: now(), Source: source, Message: msg})
}

// agentStep records a model turn: its text, its commands as tool calls,
// and obs, the next user message exactly as the model got it.
func (a *Agent) agentStep(rep *llm.Reply, r *Reply, obs string, m TurnMetrics) {
	a.mu.Lock()
	defer a.mu.Unlock()
	id := len(a.traj.Steps) + 1
	s := atifStep{StepID: id, Timestamp: now(), Source: "agent", ModelName: a.o.Model, Message: rep.Content, Reasoning: rep.ReasoningContent}
	if r != nil {
		for i, c := range r.Commands {
			s.ToolCalls = append(s.ToolCalls, atifToolCall{ID: fmt.Sprintf("call_%d_%d", id, i+1), Function: "bash_command", Arguments: c})
		}
		if r.TaskComplete {
			s.ToolCalls = append(s.ToolCalls, atifToolCall{ID: fmt.Sprintf("call_%d_done", id), Function: "mark_task_complete", Arguments: map[string]any{}})
		}
	}
	if obs != "" {
		s.Observation = &atifObs{Results: []atifResult{{Content: obs}}}
	}
	s.Metrics, _ = json.Marshal(map[string]any{
		"prompt_tokens": m.PromptTokens, "completion_tokens": m.CompletionTokens, "cached_tokens": m.CachedTokens,
		"extra": map[string]any{"generation_seconds": m.GenerationSeconds, "tool_seconds": m.ToolSeconds, "attempts": m.Attempts},
	})
	a.traj.Steps = append(a.traj.Steps, s)
}

func (a *Agent) addTurn(m TurnMetrics) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.turns = append(a.turns, m)
}

// Report implements agent.Reporter.
func (a *Agent) Report() agent.Report {
	a.mu.Lock()
	defer a.mu.Unlock()
	var in, out, cached int64
	var gen, tool float64
	retries := 0
	for _, t := range a.turns {
		in += t.PromptTokens
		out += t.CompletionTokens
		cached += t.CachedTokens
		gen += t.GenerationSeconds
		tool += t.ToolSeconds
		retries += max(t.Attempts-1, 0)
	}
	turns := append([]TurnMetrics{}, a.turns...)
	meta := map[string]any{
		"end": a.end, "shell": a.kind, "n_turns": len(a.turns), "retries": retries,
		"generation_seconds": gen, "tool_seconds": tool, "turns": turns,
	}
	traj := map[string]any{
		"schema_version": "ATIF-v1.4",
		"agent":          map[string]string{"name": Name, "version": Version, "model_name": a.o.Model},
		"steps":          a.traj.Steps,
		"final_metrics": map[string]any{
			"total_prompt_tokens": in, "total_completion_tokens": out, "total_cached_tokens": cached, "total_steps": len(a.traj.Steps),
		},
	}
	data, _ := json.MarshalIndent(traj, "", "  ")
	return agent.Report{
		InputTokens: &in, OutputTokens: &out, CachedTokens: &cached,
		ModelInfo: map[string]string{"name": a.o.Model, "provider": "openai-compatible"},
		Metadata:  meta,
		Files:     map[string][]byte{"trajectory.json": data},
	}
}
