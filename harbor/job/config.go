package job

import (
	"path"
	"time"

	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/sandbox"
)

// Config is a job's configuration, saved as config.json so that --resume
// can run the rest of it: Harbor's fields (layout.JobConfig, which
// readers of the results take) and the runner's own.
type Config struct {
	layout.JobConfig
	trial.Overrides `json:"overrides"`
	// Limits override the provider's create limits from the registry.
	Limits sandbox.Limits `json:"limits"`
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
