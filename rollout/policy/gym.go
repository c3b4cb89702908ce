package policy

import (
	"strings"

	"github.com/berth-sh/berth/session/testengine"
)

// SubmitMarker is what a mini-swe-agent command prints to end its episode.
const SubmitMarker = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"

// GymInstance is what the Gym policies know of an instance: its problem
// statement (how they tell instances apart: the harness's first user
// message holds it) and the commands that solve it.
type GymInstance struct {
	ProblemStatement string
	Solution         string
}

// BashAnswer is a reply in mini-swe-agent's format: a thought, then one
// ```bash block.
func BashAnswer(thought, command string) string {
	return "THOUGHT: " + thought + "\n\n```bash\n" + strings.TrimRight(command, "\n") + "\n```"
}

// GymGolden answers, in mini-swe-agent's format (NeMo Gym's
// mini_swe_agent_2 harness), each instance with its solution, then submits.
// A conversation about no known instance gets a submit that solves nothing.
func GymGolden(instances []GymInstance) testengine.Script {
	return func(c testengine.Call) testengine.Reply {
		ms := messages(c)
		in := findInstance(instances, ms)
		if in == nil || turn(ms) > 0 {
			return testengine.Reply{Text: BashAnswer("Submitting.", "echo "+SubmitMarker)}
		}
		return testengine.Reply{Text: BashAnswer("Running the solution.", in.Solution)}
	}
}

// GymWrong answers with a command that solves nothing, then submits.
func GymWrong(c testengine.Call) testengine.Reply {
	if turn(messages(c)) == 0 {
		return testengine.Reply{Text: BashAnswer("I will guess.", "echo guessing")}
	}
	return testengine.Reply{Text: BashAnswer("Submitting.", "echo "+SubmitMarker)}
}

func findInstance(instances []GymInstance, ms []message) *GymInstance {
	first := firstUser(ms)
	for i := range instances {
		if ps := strings.TrimSpace(instances[i].ProblemStatement); ps != "" && strings.Contains(first, ps) {
			return &instances[i]
		}
	}
	return nil
}
