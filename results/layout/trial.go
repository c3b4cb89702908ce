package layout

import "time"

// TrialResult is a trial's result.json, with Harbor's field names.
type TrialResult struct {
	ID             string          `json:"id"`
	TaskName       string          `json:"task_name"`
	TrialName      string          `json:"trial_name"`
	TrialURI       string          `json:"trial_uri"`
	TaskChecksum   string          `json:"task_checksum"`
	Source         string          `json:"source,omitempty"`
	Config         TrialConfig     `json:"config"`
	AgentInfo      AgentInfo       `json:"agent_info"`
	AgentResult    AgentResult     `json:"agent_result"`
	VerifierResult *VerifierResult `json:"verifier_result"`
	ExceptionInfo  *ExceptionInfo  `json:"exception_info"`
	StartedAt      time.Time       `json:"started_at"`
	FinishedAt     time.Time       `json:"finished_at"`

	EnvironmentSetup *Timing `json:"environment_setup"`
	AgentSetup       *Timing `json:"agent_setup"`
	AgentExecution   *Timing `json:"agent_execution"`
	Verifier         *Timing `json:"verifier"`
	// ImageResolution is berth's own addition: the part of
	// environment_setup spent fetching or building the image.
	ImageResolution *Timing `json:"image_resolution,omitempty"`
	// Teardown is berth's own addition: how long deleting the sandbox took.
	Teardown *Timing `json:"teardown,omitempty"`

	// SandboxID and Provider say where the trial ran (berth's addition).
	SandboxID string `json:"sandbox_id,omitempty"`
	Provider  string `json:"provider,omitempty"`
}

// TrialConfig is the trial configuration as recorded in result.json and
// the trial's config.json.
type TrialConfig struct {
	TaskPath          string   `json:"task_path"`
	TrialName         string   `json:"trial_name"`
	JobID             string   `json:"job_id,omitempty"`
	Agent             string   `json:"agent"`
	Environment       string   `json:"environment"`
	TimeoutMultiplier float64  `json:"timeout_multiplier"`
	OverrideCPUs      float64  `json:"override_cpus,omitempty"`
	OverrideMemoryMB  int      `json:"override_memory_mb,omitempty"`
	OverrideStorageMB int      `json:"override_storage_mb,omitempty"`
	NoDelete          bool     `json:"no_delete,omitempty"`
	Attempt           int      `json:"attempt"`
	Labels            []string `json:"labels,omitempty"`
}

// AgentInfo names the agent.
type AgentInfo struct {
	Name      string `json:"name"`
	Version   string `json:"version"`
	ModelInfo any    `json:"model_info"`
}

// AgentResult is what the agent reports; the built-in agents use no model,
// so the token counts stay null. LLM agents fill them, and metadata with
// per-turn metrics.
type AgentResult struct {
	NInputTokens   *int64         `json:"n_input_tokens"`
	NCacheTokens   *int64         `json:"n_cache_tokens"`
	NOutputTokens  *int64         `json:"n_output_tokens"`
	CostUSD        *float64       `json:"cost_usd"`
	RolloutDetails any            `json:"rollout_details"`
	Metadata       map[string]any `json:"metadata"`
}

// VerifierResult holds the rewards read from the reward file.
type VerifierResult struct {
	Rewards map[string]float64 `json:"rewards"`
}

// ExceptionInfo describes why a trial failed; ExceptionType is a Kind's
// name (or another runner's, such as a rollout connector's).
type ExceptionInfo struct {
	ExceptionType      string    `json:"exception_type"`
	ExceptionMessage   string    `json:"exception_message"`
	ExceptionTraceback string    `json:"exception_traceback"`
	OccurredAt         time.Time `json:"occurred_at"`
}

// Timing is one phase's start and end.
type Timing struct {
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
}

// Duration of the phase; 0 for a phase that did not finish.
func (t *Timing) Duration() time.Duration {
	if t == nil || t.FinishedAt.IsZero() {
		return 0
	}
	return t.FinishedAt.Sub(t.StartedAt)
}

// The timed phases of a trial, in order, as named in result.json (the
// Timing fields), in trial.log's "<phase>: start" lines, in the runner's
// events and in its summary.
const (
	PhaseEnvironment = "environment_setup"
	PhaseAgentSetup  = "agent_setup"
	PhaseAgent       = "agent_execution"
	PhaseVerifier    = "verifier"
	PhaseTeardown    = "teardown"
)

// Reward is the trial's main reward (see MainReward); 0 without a verdict,
// as Harbor counts a missing reward.
func (r *TrialResult) Reward() float64 {
	if r.VerifierResult == nil {
		return 0
	}
	return MainReward(r.VerifierResult.Rewards)
}

// MainReward picks the main reward of a verifier's rewards: "reward" when
// present, else the only value, else 0.
func MainReward(rewards map[string]float64) float64 {
	if v, ok := rewards["reward"]; ok {
		return v
	}
	if len(rewards) == 1 {
		for _, v := range rewards {
			return v
		}
	}
	return 0
}

// Failed reports whether the trial ended with an exception.
func (r *TrialResult) Failed() bool { return r.ExceptionInfo != nil }

// Exit statuses of an episode, as Miles, the smoke episode and the viewer
// name them.
const (
	ExitSubmitted                   = "Submitted"
	ExitTimeLimitExceeded           = "TimeLimitExceeded"
	ExitSequenceLengthLimitExceeded = "SequenceLengthLimitExceeded"
	ExitAgentError                  = "AgentError"
	ExitCancelled                   = "Cancelled"
)

// ExitStatus names how the episode ended: a phase's time limit, a full
// model context, a cancel, the verifier's verdict (Submitted, unless the
// infrastructure failed around it), or else an agent error. It is the one
// mapping the smoke report, the rollout's samples and the viewer share.
func (r *TrialResult) ExitStatus() string {
	var kind Kind
	if r.ExceptionInfo != nil {
		kind = Kind(r.ExceptionInfo.ExceptionType)
	}
	switch {
	case kind.TimeLimit():
		return ExitTimeLimitExceeded
	case kind == ContextLengthExceeded:
		return ExitSequenceLengthLimitExceeded
	case kind == Cancelled:
		return ExitCancelled
	case r.VerifierResult != nil && !kind.Infrastructure():
		return ExitSubmitted
	}
	return ExitAgentError
}
