package policy

import (
	"encoding/json"
	"testing"

	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/session/testengine"
)

func TestSolution(t *testing.T) {
	got := Solution("#!/bin/sh\n# make it\nset -euo pipefail\nset -x\n\nmkdir -p /app\n  echo hi > /app/x\n")
	if want := "set -x\nmkdir -p /app\n  echo hi > /app/x\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func call(msgs ...map[string]string) testengine.Call {
	b, _ := json.Marshal(msgs)
	return testengine.Call{Body: map[string]json.RawMessage{"messages": b}}
}

func TestGoldenAnswersEachTaskByItsInstruction(t *testing.T) {
	tasks := []*task.Task{{Name: "a", Instruction: "Do A.\n"}, {Name: "b", Instruction: "Do B."}}
	g := Golden(tasks, map[string]string{"a": "#!/bin/sh\necho a\n", "b": "#!/bin/sh\necho b\n"})
	sys := map[string]string{"role": "system", "content": "rules"}
	first := g(call(sys, map[string]string{"role": "user", "content": "Task:\nDo B.\n\nThe terminal shows:"}))
	var r struct {
		Commands []struct {
			Keystrokes string  `json:"keystrokes"`
			Duration   float64 `json:"duration"`
		} `json:"commands"`
		TaskComplete bool `json:"task_complete"`
	}
	if err := json.Unmarshal([]byte(first.Text), &r); err != nil || len(r.Commands) != 1 || r.Commands[0].Keystrokes != "echo b\n" || r.TaskComplete {
		t.Fatalf("first answer %q", first.Text)
	}
	// Later turns (a retried call too: it counts the assistant messages)
	// complete and confirm.
	later := g(call(sys, map[string]string{"role": "user", "content": "Task:\nDo B."}, map[string]string{"role": "assistant", "content": first.Text},
		map[string]string{"role": "user", "content": "New terminal output:\nb\nDo A."}))
	if err := json.Unmarshal([]byte(later.Text), &r); err != nil || len(r.Commands) != 0 || !r.TaskComplete {
		t.Fatalf("later answer %q", later.Text)
	}
	unknown := g(call(sys, map[string]string{"role": "user", "content": "Task:\nDo C."}))
	if err := json.Unmarshal([]byte(unknown.Text), &r); err != nil || len(r.Commands) != 0 {
		t.Fatalf("unknown task: %q", unknown.Text)
	}
}
