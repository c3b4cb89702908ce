// Package policy holds scripted policies for the session server's test
// engine (session/testengine): what a model would answer, in the terminus
// agent's reply format, so that rollouts can be shown and tested without a
// GPU. Golden answers each task with its own solution; Wrong answers with
// commands that solve nothing; Overrun answers with more text than any
// context holds. GymGolden and GymWrong do the same in mini-swe-agent's
// format (one bash block a turn), for rollouts through NeMo Gym. Nothing in
// a real rollout depends on it.
//
// Who imports it: `berth rollout --engine test:golden` and tests.
package policy

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/session/testengine"
)

// message is a chat message as the engine's request carries it.
type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func messages(c testengine.Call) []message {
	var ms []message
	_ = json.Unmarshal(c.Body["messages"], &ms)
	return ms
}

// turn counts the assistant messages already in the conversation: 0 on
// the first call, whatever retries happened.
func turn(ms []message) int {
	n := 0
	for _, m := range ms {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

// Answer is a reply in the terminus format.
func Answer(analysis string, keystrokes []string, duration float64, complete bool) string {
	cmds := []map[string]any{}
	for _, k := range keystrokes {
		cmds = append(cmds, map[string]any{"keystrokes": k, "duration": duration})
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]any{"analysis": analysis, "plan": "", "commands": cmds, "task_complete": complete})
	return strings.TrimSpace(b.String())
}

// Solution is a solve.sh as one block of keystrokes: without its shebang,
// comments and `set -e` (which would end the agent's shell at the first
// failing command), ending in a newline.
func Solution(script string) string {
	var lines []string
	for _, l := range strings.Split(script, "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") || (strings.HasPrefix(t, "set -") && strings.Contains(strings.Fields(t)[1], "e")) {
			continue
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n") + "\n"
}

// CommandWait is the duration golden commands ask for: the shell returns
// as soon as they are done.
const CommandWait = 60

// Golden answers each task with its solution, then marks the task
// complete, then confirms. It tells tasks apart by their instruction in the
// first user message; a conversation about no known task gets a reply that
// solves nothing.
func Golden(tasks []*task.Task, solutions map[string]string) testengine.Script {
	return func(c testengine.Call) testengine.Reply {
		ms := messages(c)
		t := find(tasks, ms)
		if t == nil {
			return testengine.Reply{Text: Answer("I do not know this task.", nil, 0, true)}
		}
		if turn(ms) == 0 {
			return testengine.Reply{Text: Answer("Running the solution of "+t.Name+".", []string{Solution(solutions[t.Name])}, CommandWait, false)}
		}
		return testengine.Reply{Text: Answer("The solution ran; the task is done.", nil, 0, true)}
	}
}

// Solutions reads each task's solution/solve.sh.
func Solutions(tasks []*task.Task, read func(string) ([]byte, error)) (map[string]string, error) {
	out := map[string]string{}
	for _, t := range tasks {
		if t.SolutionScript == "" {
			return nil, fmt.Errorf("task %s has no solution/solve.sh for the golden policy", t.Name)
		}
		b, err := read(t.SolutionScript)
		if err != nil {
			return nil, err
		}
		out[t.Name] = string(b)
	}
	return out, nil
}

func find(tasks []*task.Task, ms []message) *task.Task {
	first := firstUser(ms)
	for _, t := range tasks {
		if in := strings.TrimSpace(t.Instruction); in != "" && strings.Contains(first, in) {
			return t
		}
	}
	return nil
}

// firstUser is the first user message, which names the task.
func firstUser(ms []message) string {
	for _, m := range ms {
		if m.Role == "user" {
			return m.Content
		}
	}
	return ""
}

// Wrong answers with a command that solves nothing, then completes.
func Wrong(c testengine.Call) testengine.Reply {
	if turn(messages(c)) == 0 {
		return testengine.Reply{Text: Answer("I will guess.", []string{"echo guessing\n"}, 5, false)}
	}
	return testengine.Reply{Text: Answer("Done.", nil, 0, true)}
}

// Overrun answers with words without end: the engine cuts the reply at the
// request's max_tokens.
func Overrun(c testengine.Call) testengine.Reply {
	return testengine.Reply{Text: strings.Repeat("and then I thought some more, ", 20000)}
}

// Failing answers the calls fail selects with HTTP 500 (an engine
// hiccup), and every other call as next does.
func Failing(next testengine.Script, fail func(testengine.Call) bool) testengine.Script {
	return func(c testengine.Call) testengine.Reply {
		if fail(c) {
			return testengine.Reply{Status: 500, ErrorBody: `{"object":"error","message":"scripted engine failure","code":500}`}
		}
		return next(c)
	}
}
