package layout

import "time"

// JobConfig is a job's config.json, with Harbor's field names. The
// runner records more there for its own --resume (the resource
// overrides under "overrides", the create limits under "limits"), in
// types of its own; a reader ignores them.
type JobConfig struct {
	JobName   string `json:"job_name"`
	JobsDir   string `json:"jobs_dir"`
	TasksPath string `json:"tasks_path"`
	Agent     string `json:"agent"`
	// Model names the model an LLM agent uses (the eval key's middle part).
	Model       string   `json:"model,omitempty"`
	Backend     string   `json:"environment"`
	NConcurrent int      `json:"n_concurrent_trials"`
	NAttempts   int      `json:"n_attempts"`
	MaxRetries  int      `json:"max_retries"`
	Include     []string `json:"include_task_names,omitempty"`
	Exclude     []string `json:"exclude_task_names,omitempty"`
	NTasks      int      `json:"n_tasks,omitempty"`

	TimeoutMultiplier float64 `json:"timeout_multiplier"`
	NoDelete          bool    `json:"no_delete,omitempty"`

	// TTLMargin is how long a sandbox may outlive its trial's limits
	// (the registry entry's value unless set).
	TTLMargin time.Duration `json:"ttl_margin,omitempty"`
	// SandboxTTL replaces the lifetime derived from the task's limits; a
	// value the trial could outlive is refused as mid-trial.
	SandboxTTL time.Duration `json:"sandbox_ttl,omitempty"`
	// RetryBackoff bounds the wait between retries of a trial (1 s .. 60 s).
	RetryBackoffMin time.Duration `json:"retry_backoff_min,omitempty"`
	RetryBackoffMax time.Duration `json:"retry_backoff_max,omitempty"`
	// MaxDownloadMB bounds what each trial downloads from its sandbox
	// (trial.Options.MaxDownloadBytes, in MB): 0 is the trial's default,
	// negative no bound.
	MaxDownloadMB int `json:"max_download_mb,omitempty"`
}

// JobResult is a job's result.json, with Harbor's field names. The
// runner rewrites it as trials finish: no FinishedAt means the job is
// running, or was stopped before its end.
type JobResult struct {
	ID           string    `json:"id"`
	StartedAt    time.Time `json:"started_at"`
	UpdatedAt    time.Time `json:"updated_at"`
	FinishedAt   time.Time `json:"finished_at,omitzero"`
	NTotalTrials int       `json:"n_total_trials"`
	Stats        JobStats  `json:"stats"`
}

// JobStats counts a job's trials.
type JobStats struct {
	NCompleted int              `json:"n_completed_trials"`
	NErrored   int              `json:"n_errored_trials"`
	NRunning   int              `json:"n_running_trials"`
	NPending   int              `json:"n_pending_trials"`
	NCancelled int              `json:"n_cancelled_trials"`
	NRetries   int              `json:"n_retries"`
	Evals      map[string]*Eval `json:"evals"`
}

// Eval aggregates the trials of one agent__model__dataset.
type Eval struct {
	NTrials        int                            `json:"n_trials"`
	NErrors        int                            `json:"n_errors"`
	Metrics        []map[string]float64           `json:"metrics"`
	PassAtK        map[string]float64             `json:"pass_at_k,omitempty"`
	RewardStats    map[string]map[string][]string `json:"reward_stats"`
	ExceptionStats map[string][]string            `json:"exception_stats"`
}
