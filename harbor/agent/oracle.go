package agent

import (
	"context"
	"errors"
	"time"

	"github.com/berth-sh/berth/sandbox"
)

// Oracle is the golden agent: it uploads solution/ to /solution and runs
// solve.sh with the task's solution env, output in /logs/agent/oracle.txt.
type Oracle struct{}

// Name implements Agent.
func (Oracle) Name() string { return "oracle" }

// Version implements Agent.
func (Oracle) Version() string { return "1.0.0" }

// Setup implements Agent: nothing to install.
func (Oracle) Setup(context.Context, Env) error { return nil }

// Run implements Agent.
func (Oracle) Run(ctx context.Context, env Env) error {
	t := env.Task
	if t.SolutionScript == "" {
		return sandbox.Errorf(sandbox.InvalidArgument, "task %s has no solution/solve.sh for the oracle agent", t.Name)
	}
	if err := env.Sandbox.UploadDir(ctx, dirOf(t.SolutionScript), SolutionDir); err != nil {
		return err
	}
	envs := map[string]string{"DEBIAN_FRONTEND": "noninteractive"}
	for k, v := range t.Config.Solution.Env {
		envs[k] = v
	}
	return runScript(ctx, env, SolutionDir+"/solve.sh", AgentLogs+"/oracle.txt", envs)
}

// scriptRunner runs $0 with its output in $1. A script just uploaded can
// be refused with ETXTBSY ("Text file busy", exit 126): a process that
// forked while the upload's descriptor was open (an agent serving other
// calls, berth's own process for in-process providers) holds a copy of it
// until its child execs. That refusal is retried for up to a second; any
// other exit, 126 included, is the script's. berth's own process starts
// (internal/hostproc) retry ETXTBSY already, but the exec refused here is
// the shell's, of the script, which no process starter sees; and on E2B
// Cloud, Daytona and Modal the starter is the vendor's.
const scriptRunner = `chmod +x "$0" || exit
n=0
while :; do
	"$0" > "$1" 2>&1
	rc=$?
	if [ "$rc" -ne 126 ] || [ "$n" -ge 10 ] || ! grep -q 'Text file busy' "$1" 2>/dev/null; then exit "$rc"; fi
	n=$((n+1))
	sleep 0.1
done`

// runScript runs a script with its output in logFile, in the task's working
// directory, cut off when ctx's deadline passes.
func runScript(ctx context.Context, env Env, script, logFile string, envs map[string]string) error {
	cmd := sandbox.Command{
		// The shell falls back to sh for a script without a shebang.
		Args: []string{"sh", "-c", scriptRunner, script, logFile},
		Env:  envs,
		Dir:  env.Task.Workdir,
	}
	if dl, ok := ctx.Deadline(); ok {
		cmd.Timeout = time.Until(dl)
		if cmd.Timeout <= 0 {
			return context.DeadlineExceeded
		}
	}
	res, err := env.Sandbox.Run(ctx, cmd)
	if err != nil {
		if errors.Is(err, sandbox.ErrDeadlineExceeded) {
			return errors.Join(context.DeadlineExceeded, err)
		}
		return err
	}
	if res.ExitCode != 0 {
		return &ExitError{Code: res.ExitCode}
	}
	return nil
}

// Nop does nothing; on a real task its reward should be 0.
type Nop struct{}

// Name implements Agent.
func (Nop) Name() string { return "nop" }

// Version implements Agent.
func (Nop) Version() string { return "1.0.0" }

// Setup implements Agent.
func (Nop) Setup(context.Context, Env) error { return nil }

// Run implements Agent.
func (Nop) Run(context.Context, Env) error { return nil }
