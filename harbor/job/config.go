package job

import (
	"path"
	"time"

	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/sandbox"
)

// Config is a job's configuration, saved as config.json so that --resume
// can run the rest of it.
type Config struct {
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
	trial.Overrides   `json:"overrides"`
	NoDelete          bool `json:"no_delete,omitempty"`

	// Limits override the provider's create limits from the registry.
	Limits sandbox.Limits `json:"limits"`
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

func (c *Config) defaults() {
	if c.JobsDir == "" {
		c.JobsDir = "jobs"
	}
	if c.JobName == "" {
		c.JobName = time.Now().Format("2006-01-02__15-04-05")
	}
	if c.Agent == "" {
		c.Agent = "oracle"
	}
	if c.NConcurrent <= 0 {
		c.NConcurrent = 4
	}
	if c.NAttempts <= 0 {
		c.NAttempts = 1
	}
	if c.TimeoutMultiplier <= 0 {
		c.TimeoutMultiplier = 1
	}
	if c.RetryBackoffMin <= 0 {
		c.RetryBackoffMin = time.Second
	}
	if c.RetryBackoffMax <= 0 {
		c.RetryBackoffMax = time.Minute
	}
}

// selected reports whether the task name passes the include and exclude
// globs (matched against the full name and its last path element).
func (c *Config) selected(name string) bool {
	match := func(globs []string) bool {
		for _, g := range globs {
			if ok, _ := path.Match(g, name); ok {
				return true
			}
			if ok, _ := path.Match(g, path.Base(name)); ok {
				return true
			}
		}
		return false
	}
	if len(c.Include) > 0 && !match(c.Include) {
		return false
	}
	return !match(c.Exclude)
}
