package rollout_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/builtin"
	"github.com/berth-sh/berth/harbor/agent/command"
	"github.com/berth-sh/berth/harbor/job"
	"github.com/berth-sh/berth/internal/testing/localtest"
	"github.com/berth-sh/berth/internal/testing/nettest"
	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/rollout"
	"github.com/berth-sh/berth/rollout/agents"
	"github.com/berth-sh/berth/rollout/rollouttest"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/session/testengine"
)

// shellAgent is an in-sandbox harness in busybox sh: it first tries the
// host beyond its route (every address it is given; a connection that
// answers is a leak; its own listener must answer) and the relay's refusals, then asks the model (the
// session's OpenAI endpoint, with busybox wget) what to do about the
// task's instruction and runs the reply.
const shellAgent = probeHost + callModel

const probeHost = `
# A listener of the sandbox's own: the probe's positive control.
printf host-reached | nc -l -p 5555 &
sleep 0.3
for a in 127.0.0.1:5555 $PROBES; do
  if nc -w 2 "${a%:*}" "${a##*:}" </dev/null 2>/dev/null | grep -q host-reached; then echo "$a" >> /logs/agent/leaks; fi
done
wget -q -O - --post-data '{}' "$OPENAI_API_BASE/chat/completions" >/dev/null 2>&1 && echo no-token >> /logs/agent/leaks
wget -q -O - --post-data '{}' --header "Authorization: Bearer $OPENAI_API_KEY" "${ANTHROPIC_BASE_URL}/sessions" >/dev/null 2>&1 && echo control-route >> /logs/agent/leaks
`

const callModel = `
echo "base=$OPENAI_API_BASE anthropic=$ANTHROPIC_BASE_URL model=$BERTH_MODEL"
body=$(printf '{"model":"%s","messages":[{"role":"user","content":"%s"}]}' "$BERTH_MODEL" "$(cat "$BERTH_INSTRUCTION_FILE")")
resp=$(busybox wget -q -O - --header "Authorization: Bearer $OPENAI_API_KEY" --header "Content-Type: application/json" --post-data "$body" "$OPENAI_API_BASE/chat/completions") || { echo "the model call failed"; exit 9; }
cmd=$(printf '%s' "$resp" | sed -n 's/.*"content":"\([^"]*\)".*/\1/p')
echo "the model said: $cmd"
eval "$cmd"
`

// commandPolicy answers each task's instruction with a shell command.
func commandPolicy(c testengine.Call) testengine.Reply {
	body := string(c.Body["messages"])
	for k, v := range map[string]string{"TASK=answer": "printf 42 | tee /tmp/answer", "TASK=slow": "sleep 60", "TASK=fails": "exit 3"} {
		if strings.Contains(body, k) {
			return testengine.Reply{Text: v}
		}
	}
	return testengine.Reply{Text: "true"}
}

// commandAgent is the command agent with o, through externalURL when set.
func commandAgent(t testing.TB, o command.Options, externalURL string) rollout.Agent {
	t.Helper()
	a, err := agents.Command(o, externalURL)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// writeCommandTask writes a network-none task whose verifier wants 42 in
// /tmp/answer.
func writeCommandTask(t *testing.T, dir, name string, agentTimeout int) {
	t.Helper()
	files := map[string]string{
		"task.toml": fmt.Sprintf("schema_version = \"1.1\"\n[agent]\ntimeout_sec = %d.0\n[verifier]\ntimeout_sec = 60.0\n"+
			"[environment]\ndocker_image = \"berth.local/busybox:latest\"\nallow_internet = false\n", agentTimeout),
		"instruction.md": "TASK=" + name + ": write 42 to /tmp/answer.\n",
		"tests/test.sh":  "#!/bin/sh\n[ \"$(cat /tmp/answer)\" = 42 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n",
	}
	for n, body := range files {
		p := filepath.Join(dir, name, n)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// The in-sandbox command agent on local, network none: a shell script
// calling the session's OpenAI endpoint with busybox wget reaches the
// session server through the reverse port; the rollout's sample carries
// the reward, its loss mask is 1 exactly on the model's reply; the
// sandbox still reaches no other host address, and the relay refuses
// requests without its token and the session server's control routes.
// The harness's exit code and the agent timeout land in the trial and the
// sample as for other agents.
func TestCommandAgentReversePort(t *testing.T) {
	env := localEnv(t)
	reg := builtin.Registry()

	// What the sandbox must not reach: host listeners on loopback and on
	// every address, the session server itself at its own address.
	pe := rollouttest.NewPolicyEngine(t, commandPolicy)
	probes := []string{
		fmt.Sprintf("127.0.0.1:%d", nettest.Listen(t, "127.0.0.1", "host-reached")),
		fmt.Sprintf("10.0.2.2:%d", nettest.Listen(t, "127.0.0.1", "host-reached")),
	}
	anyPort := nettest.Listen(t, "0.0.0.0", "host-reached")
	for _, a := range append(nettest.HostIPv4(t), "127.0.0.1") {
		probes = append(probes, fmt.Sprintf("%s:%d", a, anyPort))
	}
	tasks := t.TempDir()
	writeCommandTask(t, tasks, "answer", 60)
	writeCommandTask(t, tasks, "slow", 3)
	writeCommandTask(t, tasks, "fails", 60)
	jobs := t.TempDir()

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	_, err := rollout.Run(ctx, rollout.Config{
		Job:    job.Config{JobConfig: layout.JobConfig{JobName: "cmd", JobsDir: jobs, TasksPath: tasks, Backend: "local", NConcurrent: 3, NAttempts: 1}},
		Agent:  commandAgent(t, command.Options{Command: "PROBES='" + strings.Join(probes, " ") + "'\n" + shellAgent, Model: "policy"}, ""),
		Strict: true,
	}, rollout.Options{Registry: reg, Env: env, Sessions: pe.Client, TokenText: pe.TokenText})
	if err != nil {
		t.Fatalf("rollout: %v", err)
	}
	for _, d := range rollouttest.TrialDirs(t, filepath.Join(jobs, "cmd")) {
		name := strings.SplitN(filepath.Base(d), "__", 2)[0]
		r := rollouttest.TrialResult(t, d)
		log, _ := os.ReadFile(filepath.Join(d, "agent", "command.txt"))
		t.Logf("%s: %v; agent log:\n%s", name, r.AgentResult.Metadata, log)
		if leaks, _ := os.ReadFile(filepath.Join(d, "agent", "leaks")); string(leaks) != "127.0.0.1:5555\n" {
			t.Errorf("%s: the sandbox reached past its route (or missed its own listener, the probe's control): %q", name, leaks)
		}
		if !strings.Contains(string(log), fmt.Sprintf("base=http://127.0.0.1:%d/v1 anthropic=http://127.0.0.1:%d model=policy", command.DefaultPort, command.DefaultPort)) {
			t.Errorf("%s: agent log:\n%s", name, log)
		}
		if r.AgentInfo.Name != command.Name || r.AgentResult.Metadata["model_route"] != command.RouteReversePort {
			t.Errorf("%s: agent %+v %+v", name, r.AgentInfo, r.AgentResult)
		}
		ss := rollouttest.ReadSamples(t, d)
		if len(ss) != 1 {
			t.Fatalf("%s: %d samples", name, len(ss))
		}
		s := ss[0]
		checkReplyMasked(t, d, s, commandPolicy)
		switch name {
		case "answer":
			if r.ExceptionInfo != nil || r.Reward() != 1 || s.Status != "COMPLETED" || s.Metadata.ExitStatus != rollout.Submitted || s.Reward == nil || *s.Reward != 1 {
				t.Fatalf("answer: exception %+v reward %v; sample %s %s %v\n%s", r.ExceptionInfo, r.Reward(), s.Status, s.Metadata.ExitStatus, s.Reward, log)
			}
			if r.AgentResult.Metadata["exit_code"] != float64(0) || r.AgentResult.Metadata["model_requests"] != float64(1) {
				t.Fatalf("answer: metadata %v", r.AgentResult.Metadata)
			}
			if !strings.Contains(string(log), "the model said: printf 42 | tee /tmp/answer\n42") {
				t.Fatalf("answer: log\n%s", log)
			}
		case "slow":
			if r.ExceptionInfo == nil || r.ExceptionInfo.ExceptionType != "AgentTimeoutError" || s.Metadata.ExitStatus != rollout.TimeLimitExceeded || *s.Reward != 0 {
				t.Fatalf("slow: exception %+v; sample %s %s", r.ExceptionInfo, s.Status, s.Metadata.ExitStatus)
			}
		case "fails":
			code, _ := os.ReadFile(filepath.Join(d, "agent", "exit-code.txt"))
			if string(code) != "3\n" || r.AgentResult.Metadata["exit_code"] != float64(3) || *s.Reward != 0 || s.Status != "COMPLETED" {
				t.Fatalf("fails: exit-code.txt %q, metadata %v, sample %s reward %v", code, r.AgentResult.Metadata, s.Status, *s.Reward)
			}
		}
	}
	if n := pe.LiveSessions(); n != 0 {
		t.Fatalf("%d sessions left open", n)
	}
	p, err := reg.Open(context.Background(), "local", env, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if left, _ := p.List(context.Background(), map[string]string{"berth.job": "cmd"}); len(left) > 0 {
		t.Fatalf("sandboxes left: %v", left)
	}
}

// localEnv is the environment of the local provider on a state directory
// of the test's own (swept at the end), skipping the test where the local
// provider cannot run.
func localEnv(t *testing.T) registry.Environ {
	t.Helper()
	testbin.NeedLocal(t)
	rollouttest.Qwen3(t)
	agentBin, err := testbin.Agent()
	if err != nil {
		t.Fatal(err)
	}
	state, err := os.MkdirTemp("", "berth-cmd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { localtest.Sweep(local.Options{AgentBinary: agentBin}, state) })
	return registry.MapEnviron(map[string]string{local.EnvStateDir: state, local.EnvAgentBinary: agentBin}, t.TempDir())
}

// checkReplyMasked checks that the sample's loss mask is 1 exactly on the
// model's one reply (its text, then the end of turn).
func checkReplyMasked(t *testing.T, dir string, s rollouttest.Sample, policy testengine.Script) {
	t.Helper()
	n, ones := len(s.Tokens), 0
	start := n - len(s.LossMask)
	var masked strings.Builder
	for i, m := range s.LossMask {
		if m == 1 {
			ones++
			masked.WriteString(s.TokenTexts[start+i])
		}
	}
	got := masked.String()
	if ones == 0 || !strings.HasSuffix(got, "<|im_end|>") {
		t.Fatalf("%s: the masked tokens %q are not a reply", dir, got)
	}
	want := policy(testengine.Call{Body: map[string]json.RawMessage{"messages": json.RawMessage(strings.Join(s.TokenTexts, ""))}}).Text
	if strings.TrimSuffix(got, "<|im_end|>") != want {
		t.Fatalf("%s: masked %q, the model said %q", dir, got, want)
	}
}

// A provider without the reverse port and no external URL: the rollout
// refuses before any sandbox or session, saying what to give. With an
// external URL (the session server's address, which the fake provider's
// sandboxes reach) the harness is given that session's URL and the
// rollout goes ahead.
func TestCommandAgentNoRoute(t *testing.T) {
	f := newFakeRun(t, func(string) testengine.Script { return commandPolicy })
	f.tasks = t.TempDir()
	writeCommandTask(t, f.tasks, "answer", 60)
	cmdAgent := func(c *rollout.Config) {
		c.Job.NAttempts, c.Agent = 1, commandAgent(t, command.Options{Command: callModel, Model: "policy"}, "")
	}
	_, err := f.run(t.Context(), t, cmdAgent)
	if !errors.Is(err, sandbox.ErrNotSupported) || !strings.Contains(err.Error(), "the fake provider has no reverse port") || !strings.Contains(err.Error(), "--external-url") {
		t.Fatalf("rollout without a route: %v", err)
	}
	if _, serr := os.Stat(filepath.Join(f.jobs, "r")); serr == nil {
		t.Fatal("the refused rollout wrote a job")
	}

	// The key of the session server (this one takes any) goes into the
	// sandbox with an external URL; the harness prints it, and its log has
	// it scrubbed.
	const key = "sk-SECRET-session-9d2c"
	f.pe.Client.APIKey = key
	res, err := f.run(t.Context(), t, func(c *rollout.Config) {
		c.Job.NAttempts = 1
		c.Agent = commandAgent(t, command.Options{Command: "echo \"key: $OPENAI_API_KEY\"\n" + callModel, Model: "policy"}, f.pe.Client.BaseURL+"/")
	})
	if err != nil {
		t.Fatal(err)
	}
	d := f.dirs(t)[0]
	r := rollouttest.TrialResult(t, d)
	log, _ := os.ReadFile(filepath.Join(d, "agent", "command.txt"))
	ss := rollouttest.ReadSamples(t, d)
	if res.Rollout.Samples != 1 || r.Reward() != 1 || r.AgentResult.Metadata["model_route"] != command.RouteExternal ||
		!strings.Contains(string(log), "base="+f.pe.Client.BaseURL+"/sessions/"+ss[0].SessionID+"/v1 anthropic="+f.pe.Client.BaseURL+"/sessions/"+ss[0].SessionID+" ") {
		t.Fatalf("reward %v, metadata %v, log\n%s", r.Reward(), r.AgentResult.Metadata, log)
	}
	checkReplyMasked(t, d, ss[0], commandPolicy)
	if !strings.Contains(string(log), "key: [REDACTED]\n") {
		t.Fatalf("the harness's log:\n%s", log)
	}
	filepath.Walk(filepath.Join(f.jobs, "r"), func(p string, fi os.FileInfo, err error) error {
		if b, _ := os.ReadFile(p); err == nil && fi.Mode().IsRegular() && strings.Contains(string(b), key) {
			t.Errorf("%s holds the key", p)
		}
		return nil
	})
	f.leftovers(t)
}

// The rollout picks no agent of its own: without one it refuses before
// any sandbox, session or job directory.
func TestRolloutNeedsAgent(t *testing.T) {
	f := newFakeRun(t, func(string) testengine.Script { return commandPolicy })
	_, err := f.run(t.Context(), t, func(c *rollout.Config) { c.Agent = nil })
	if !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), "needs an agent") {
		t.Fatalf("rollout without an agent: %v", err)
	}
	if _, serr := os.Stat(filepath.Join(f.jobs, "r")); serr == nil {
		t.Fatal("the refused rollout wrote a job")
	}
	f.leftovers(t)
}
