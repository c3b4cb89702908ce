package smoke

import (
	"context"
	"fmt"

	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/hud"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
)

// HUDEpisode runs one golden episode against the HUD server at addr and
// returns its phases and grade (for the benchmark).
func HUDEpisode(ctx context.Context, addr string, t *task.Task, agentName string) ([]Phase, hud.Grade, error) {
	e := &episode{}
	err := golden(ctx, addr, t, agentName, e)
	return e.phases, e.grade, err
}

// BuiltinTask is the built-in task on image.
func BuiltinTask(image string) (*task.Task, func(), error) { return loadTask("", image) }

// OpenEnvServer serves the hosted tbench2 environment over prov for t's
// task, maxEnvs sessions at once (for the benchmark).
func OpenEnvServer(t *task.Task, prov *sandbox.Provider, maxEnvs int) (base string, stop func(), err error) {
	return startOpenEnv(t, registry.Entry{}, prov, maxEnvs)
}

// OpenEnvEpisode runs one golden episode through the OpenEnv server at
// base (reset, the solution through exec actions, evaluate, close) and
// returns its reward.
func OpenEnvEpisode(ctx context.Context, base string, t *task.Task) (float64, error) {
	client, err := newOpenEnvClient(base, t)
	if err != nil {
		return 0, err
	}
	ep := &oeEpisode{rep: &Report{Agent: "golden"}, client: client}
	ep.episode(ctx, Options{Agent: "golden"}, t)
	// Close returns once the session's sandbox is deleted.
	err = client.Close()
	if ep.rep.Exception != "" {
		return 0, fmt.Errorf("%s: %s", ep.rep.Exception, ep.rep.Message)
	}
	return ep.rep.Reward, err
}
