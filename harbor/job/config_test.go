package job_test

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/berth-sh/berth/harbor/job"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/sandbox"
)

// TestConfigFile pins config.json across the split of job.Config into
// Harbor's part (layout.JobConfig, what the results reader takes) and the
// runner's own: the keys are the ones berth wrote before the split (so
// old jobs resume), the runner reads everything back, and the reader gets
// Harbor's part whole.
func TestConfigFile(t *testing.T) {
	in := job.Config{
		JobConfig: layout.JobConfig{JobName: "j", JobsDir: "/jobs", TasksPath: "/tasks", Agent: "oracle", Model: "m", Backend: "local",
			NConcurrent: 2, NAttempts: 3, MaxRetries: 4, Include: []string{"a*"}, Exclude: []string{"b*"}, NTasks: 5,
			TimeoutMultiplier: 1.5, NoDelete: true, TTLMargin: time.Minute, SandboxTTL: time.Hour,
			RetryBackoffMin: time.Second, RetryBackoffMax: 2 * time.Second, MaxDownloadMB: 7},
		Overrides: trial.Overrides{CPUs: 2, MemoryMB: 512, StorageMB: 1024},
		Limits:    sandbox.Limits{CreateConcurrency: 3, MaxLive: 9},
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	want := []string{"agent", "environment", "exclude_task_names", "include_task_names", "job_name", "jobs_dir", "limits",
		"max_download_mb", "max_retries", "model", "n_attempts", "n_concurrent_trials", "n_tasks", "no_delete", "overrides",
		"retry_backoff_max", "retry_backoff_min", "sandbox_ttl", "tasks_path", "timeout_multiplier", "ttl_margin"}
	got := slices.Sorted(maps.Keys(keys))
	if !slices.Equal(got, want) {
		t.Errorf("config.json keys\n got %v\nwant %v", got, want)
	}
	var back job.Config
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, in) {
		t.Errorf("the runner reads back %+v (%v), want %+v", back, err, in)
	}
	var read layout.JobConfig
	if err := json.Unmarshal(b, &read); err != nil || !reflect.DeepEqual(read, in.JobConfig) {
		t.Errorf("the reader reads %+v (%v), want %+v", read, err, in.JobConfig)
	}
}
