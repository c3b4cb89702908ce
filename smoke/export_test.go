package smoke

import (
	"context"

	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/hud"
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
