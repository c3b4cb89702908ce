package view_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-sh/berth/results/resultstest"
)

// Attack strings a task controls. Each sets a window flag if it ever
// runs, so a browser test can tell; each also appears in text where the
// page must show it literally.
const (
	xssScript = `<script>window.__xss=1</script>`
	xssImg    = `"><img src=x onerror="window.__xss=2">`
	xssURL    = `javascript:window.__xss=3`
	xssQuote  = `' onmouseover='window.__xss=4' x='`
	xssAll    = xssScript + xssImg + " " + xssURL + " " + xssQuote
	// Directory names cannot hold '/': these are the name-shaped attacks.
	xssDirImg = `xss-"><img src=x onerror=window.__xss=5>`
	xssDirURL = `javascript:window.__xss=6`
	xssJob    = `job-"'<b>x`
)

// xssTrajectory is an ATIF trajectory whose every text is an attack.
const xssTrajectory = `{"schema_version": "ATIF-v1.4", "session_id": "s", "agent": {"name": "evil<script>window.__xss=7</script>", "version": "1"},
 "steps": [
  {"step_id": 1, "source": "user", "message": "<script>window.__xss=8</script>"},
  {"step_id": 2, "source": "agent\" onclick=\"window.__xss=9", "message": "<img src=x onerror=\"window.__xss=10\">",
   "tool_calls": [{"tool_call_id": "c1", "function_name": "<b>bash</b>", "arguments": {"command": "echo '<script>window.__xss=11</script>'"}}],
   "observation": {"results": [{"source_call_id": "c1", "content": "<a href=\"javascript:window.__xss=12\">click</a>"}]}}
 ]}`

// writeXSSJob writes a finished job whose task names, trial directory
// names, exception, reward key, outputs, reward file, trajectory,
// instruction and samples all carry attacks, and returns the job's
// directory.
func writeXSSJob(t *testing.T, jobs string) string {
	t.Helper()
	task := t.TempDir()
	if err := os.WriteFile(filepath.Join(task, "instruction.md"), []byte("Do "+xssAll+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	samples, err := os.ReadFile("../results/testdata/samples.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"agent/oracle.txt":         xssAll + "\n",
		"agent/trajectory.json":    xssTrajectory,
		"verifier/test-stdout.txt": xssAll + "\n",
		"verifier/reward.txt":      xssAll + "\n",
		"samples.jsonl":            string(samples),
	}
	return resultstest.Job(t, jobs, xssJob, true, time.Time{}, []resultstest.Trial{
		{Task: xssAll, Name: xssDirImg + "__1", TaskPath: task, Error: "VerifierOutputParseError<script>window.__xss=13</script>",
			Message: "reward.txt holds " + xssAll, Files: files},
		{Task: xssDirURL, Name: xssDirURL + "__2", TaskPath: task, Rewards: map[string]float64{xssScript: 1}, Files: files},
		{Task: "plain", Name: "plain__3", Rewards: resultstest.Reward(0)},
	})
}
