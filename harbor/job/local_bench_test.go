package job_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/berth-sh/berth/builtin"
	"github.com/berth-sh/berth/harbor/job"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/internal/testing/benchstat"
	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/sandbox"
)

// BenchmarkJobLocal runs a job of trivial trials on the local provider, as
// `berth run -p DIR -n N` would, and reports the job's wall time per
// trial and the p50/p95 of berth's own time per trial: the trial's wall
// time less the time its two commands (solve.sh, test.sh) ran, which the
// task itself measures inside the sandbox.
//
//	go test ./harbor/job -run '^$' -bench JobLocal -benchtime 1x -timeout 30m
//
// BERTH_BENCH_TRIALS and BERTH_BENCH_CONCURRENCY override 1000 and 32;
// BERTH_BENCH_POOL sets BERTH_POOL_SIZE (sandboxes local keeps started
// ahead); unset, the local entry's default applies (2).
func BenchmarkJobLocal(b *testing.B) {
	testbin.NeedLocal(b)
	trials, conc := benchstat.EnvInt("BERTH_BENCH_TRIALS", 1000), benchstat.EnvInt("BERTH_BENCH_CONCURRENCY", 32)
	agent, err := testbin.Agent()
	if err != nil {
		b.Fatal(err)
	}
	tasks := b.TempDir()
	for i := range trials {
		writeTrivialTask(b, filepath.Join(tasks, fmt.Sprintf("t%04d", i)))
	}
	state := b.TempDir()
	vars := map[string]string{local.EnvStateDir: state, local.EnvAgentBinary: agent}
	if pool := os.Getenv("BERTH_BENCH_POOL"); pool != "" {
		vars[registry.PoolSizeVar] = pool // 0: every create cold
	}
	env := registry.MapEnviron(vars, b.TempDir())
	reg := builtin.Registry()
	// Seed the image once, outside the timing.
	p, err := reg.Open(context.Background(), "local", env, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := p.PrepareImage(context.Background(), trivialSpec()); err != nil {
		b.Fatal(err)
	}
	p.Close()

	for i := 0; i < b.N; i++ {
		jobs := b.TempDir()
		start := time.Now()
		res, sum, err := job.Run(context.Background(), job.Config{
			JobConfig: layout.JobConfig{JobName: "bench", JobsDir: jobs, TasksPath: tasks, Backend: "local", NConcurrent: conc},
		}, job.Options{Registry: reg, Env: env})
		wall := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if res.Stats.NCompleted != trials || sum.Passed != trials {
			b.Fatalf("stats %+v, passed %d", res.Stats, sum.Passed)
		}
		over := overheads(b, filepath.Join(jobs, "bench"))
		b.ReportMetric(wall.Seconds(), "s/job")
		b.ReportMetric(float64(wall.Milliseconds())/float64(trials), "ms-wall/trial")
		b.ReportMetric(benchstat.Percentile(over, 0.50), "ms-overhead-p50")
		b.ReportMetric(benchstat.Percentile(over, 0.95), "ms-overhead-p95")
		b.Logf("%d trials at -n %d: %.1f s; berth's time per trial p50 %.1f ms, p95 %.1f ms; phases %+v",
			trials, conc, wall.Seconds(), benchstat.Percentile(over, 0.5), benchstat.Percentile(over, 0.95), sum.Phases)
	}
}

func trivialSpec() sandbox.Spec { return sandbox.Spec{Image: "berth.local/busybox:latest"} }

// overheads reads every trial's result and the command times the task
// recorded, and returns berth's own milliseconds per trial.
func overheads(b *testing.B, jobDir string) []float64 {
	dirs, _ := filepath.Glob(filepath.Join(jobDir, "*__*"))
	var out []float64
	for _, d := range dirs {
		var r trial.Result
		readJSON(b, filepath.Join(d, "result.json"), &r)
		total := r.FinishedAt.Sub(r.StartedAt)
		cmds := cmdTime(filepath.Join(d, "agent", "oracle.txt")) + cmdTime(filepath.Join(d, "verifier", "test-stdout.txt"))
		out = append(out, float64(total-cmds)/float64(time.Millisecond))
	}
	slices.Sort(out)
	return out
}

// cmdTime reads "start end" in nanoseconds that a trivial script printed.
func cmdTime(p string) time.Duration {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	var s, e int64
	if _, err := fmt.Sscan(string(b), &s, &e); err != nil || e < s {
		return 0
	}
	return time.Duration(e - s)
}

func writeTrivialTask(b *testing.B, dir string) {
	// Each script prints its own start and end (busybox date +%s%N) so the
	// benchmark can take the task's time out of the trial's.
	files := map[string]string{
		"task.toml": "schema_version = \"1.1\"\n[agent]\ntimeout_sec = 120.0\n[verifier]\ntimeout_sec = 120.0\n" +
			"[environment]\ndocker_image = \"berth.local/busybox:latest\"\nallow_internet = false\n",
		"instruction.md":    "Write 42.\n",
		"solution/solve.sh": "#!/bin/sh\ns=$(date +%s%N)\necho 42 > /tmp/answer\necho $s $(date +%s%N)\n",
		"tests/test.sh":     "#!/bin/sh\ns=$(date +%s%N)\n[ \"$(cat /tmp/answer)\" = 42 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\necho $s $(date +%s%N)\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			b.Fatal(err)
		}
	}
}
