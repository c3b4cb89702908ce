package rollout_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/builtin"
	"github.com/berth-sh/berth/harbor/agent/command"
	"github.com/berth-sh/berth/harbor/job"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/rollout"
	"github.com/berth-sh/berth/rollout/rollouttest"
	"github.com/berth-sh/berth/session/heaptest"
)

// hugeBodies is a hostile harness: six 29 MB chat bodies at once, through
// the reverse port and the relay to its session, each under the session
// server's body limit and far over its session's tokens; it notes each
// answer's status, then does the task as callModel does.
const hugeBodies = `
printf '{"model":"%s","messages":[{"role":"user","content":"' "$BERTH_MODEL" > /tmp/big
yes 'hello world, this is some text.' | head -c 29000000 | tr '\n' ' ' >> /tmp/big
printf '"}]}' >> /tmp/big
for i in 1 2 3 4 5 6; do
  ( busybox wget -S -O /dev/null --header "Authorization: Bearer $OPENAI_API_KEY" --header "Content-Type: application/json" \
      --post-file /tmp/big "$OPENAI_API_BASE/chat/completions" 2>&1 | grep -o 'HTTP/1.1 [0-9]*' | head -n 1 >> /logs/agent/statuses ) &
done
wait
rm /tmp/big
` + callModel

// TestHostileHarnessThroughRelayBounded: berth rollout runs the session
// server in process, and the command agent's relay streams a sandbox's
// requests to it, so the server's bounds hold there too. On 5553f78 the
// six bodies were parsed and tokenized at once, as they came (one hostile
// harness took berth rollout to 1.4 GB; this one grew the heap by 1.2 GB,
// read at the default GOGC). Now each is refused, 400 (too many tokens) or
// 429 (its session holds two bodies already, with Retry-After), one is
// tokenized at a time, the heap grows by about 230 MB (heaptest's reading,
// under 512), and the harness's next, ordinary call does the task.
func TestHostileHarnessThroughRelayBounded(t *testing.T) {
	env := localEnv(t)
	pe := rollouttest.NewPolicyEngine(t, commandPolicy)
	tasks, jobs := t.TempDir(), t.TempDir()
	writeCommandTask(t, tasks, "answer", 300)

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var err error
	grew := heaptest.Growth(func() {
		_, err = rollout.Run(ctx, rollout.Config{
			Job:    job.Config{JobConfig: layout.JobConfig{JobName: "hostile", JobsDir: jobs, TasksPath: tasks, Backend: "local", NConcurrent: 1, NAttempts: 1}},
			Agent:  commandAgent(t, command.Options{Command: hugeBodies, Model: "policy"}, ""),
			Strict: true,
		}, rollout.Options{Registry: builtin.Registry(), Env: env, Sessions: pe.Client, TokenText: pe.TokenText})
	})
	if err != nil {
		t.Fatalf("rollout: %v", err)
	}
	d := rollouttest.TrialDirs(t, filepath.Join(jobs, "hostile"))[0]
	statuses, _ := os.ReadFile(filepath.Join(d, "agent", "statuses"))
	t.Logf("statuses the harness saw:\n%sthe heap grew %d MB", statuses, grew>>20)
	for _, s := range strings.Fields(strings.ReplaceAll(string(statuses), "HTTP/1.1", "")) {
		if s != "400" && s != "429" {
			t.Errorf("a huge body was answered %s", s)
		}
	}
	// What the session server did with the six: each refused, for its
	// tokens or for want of room. (A wget whose body was refused before it
	// had sent it all dies of SIGPIPE and notes nothing.)
	refused, busy := pe.Metric(`berth_session_turns_total{outcome="refused"}`), pe.Metric("berth_session_busy_refusals_total")
	if refused < 1 || refused+busy != 6 {
		t.Errorf("the server refused %d for their tokens and %d for room, want six in all, some for their tokens", refused, busy)
	}
	if r := rollouttest.TrialResult(t, d); r.Reward() != 1 {
		log, _ := os.ReadFile(filepath.Join(d, "agent", "command.txt"))
		t.Errorf("reward %v after the refusals; log:\n%s", r.Reward(), log)
	}
	if grew > 512<<20 {
		t.Errorf("the heap grew %d MB", grew>>20)
	}
	if n := pe.LiveSessions(); n != 0 {
		t.Errorf("%d sessions left open", n)
	}
}
