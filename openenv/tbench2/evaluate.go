package tbench2

import (
	"context"
	"time"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/openenv"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/sandbox"
)

// verifierTail bounds the verifier output an evaluate returns.
const verifierTail = 8 << 10

// evaluate scores the episode with the task's verifier, as a Harbor trial
// does.
func (e *Env) evaluate(ctx context.Context) outcome {
	rewards, err := trial.Verify(ctx, e.sb, e.task, e.task.VerifierTimeout, nil)
	o := outcome{done: true, output: e.verifierOutput(ctx)}
	if err != nil {
		// No verdict: reward null, error set, and no harness mark.
		o.err = err
		return o
	}
	r := layout.MainReward(rewards)
	o.reward = &r
	o.info = map[string]any{"tests_passed": r >= 1, "harness": Harness}
	if len(rewards) > 1 {
		all := make(map[string]openenv.Float, len(rewards))
		for k, v := range rewards {
			all[k] = openenv.Float(v)
		}
		o.info["rewards"] = all
	}
	return o
}

// verifierOutput is the tail of what test.sh printed.
func (e *Env) verifierOutput(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	out := newCapped(verifierTail)
	_, err := e.sb.Run(ctx, sandbox.Command{
		Args:   []string{"tail", "-c", "8192", agent.VerifierLogs + "/test-stdout.txt"},
		Stdout: out,
	})
	if err != nil {
		return ""
	}
	return out.String()
}
