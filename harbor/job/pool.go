package job

import "github.com/berth-sh/berth/harbor/task"

// jobPoolSize is the pool a job asks for: one sandbox ready while the last
// one's trial ends, and one more for the create that overlaps it.
const jobPoolSize = 2

// poolSize is how many sandboxes the job asks its provider to keep started
// ahead (registry.PoolSizeVar, honoured by the local provider) when the
// launcher did not say. A pool helps only when the next trial starts from
// the image it was filled with: a job of one task (any number of attempts),
// or of tasks that all name the same docker_image and network. For mixed
// images it is 0: a pool kept for the last task's image would be thrown
// away at the next task's, two sandboxes started for nothing per trial.
func poolSize(tasks []*task.Task, attempts int) int {
	trials := len(tasks) * max(attempts, 1)
	if trials < 2 {
		return 0
	}
	first := tasks[0]
	for _, t := range tasks[1:] {
		if t.Image == "" || t.Image != first.Image || t.Network != first.Network {
			return 0
		}
	}
	return min(jobPoolSize, trials-1)
}
