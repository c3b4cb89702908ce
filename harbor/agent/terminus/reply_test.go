package terminus

import (
	"strings"
	"testing"
)

func TestParseReply(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		cmds       int
		complete   bool
		warn       string
		err        string
	}{
		{name: "plain", text: `{"analysis":"a","plan":"p","commands":[{"keystrokes":"ls\n","duration":0.5}],"task_complete":false}`, cmds: 1},
		{name: "fenced with thinking", text: "<think>I think {maybe}</think>\n```json\n{\"analysis\":\"a\",\"plan\":\"p\",\"commands\":[],\"task_complete\":true}\n```", complete: true},
		{name: "chatter around", text: "Sure! {\"commands\":[{\"keystrokes\":\"x\"}]} hope it helps", cmds: 1, warn: "outside the JSON"},
		{name: "duration capped", text: `{"commands":[{"keystrokes":"sleep 999\n","duration":999}]}`, cmds: 1, warn: "capped"},
		{name: "string bool", text: `{"commands":[],"task_complete":"true"}`, complete: true, warn: "true or false"},
		{name: "no json", text: "I will now run ls.", err: "no JSON object"},
		{name: "broken json", text: `{"commands": [ {"keystrokes": "ls\n" ]}`, err: "no valid JSON"},
		{name: "missing keystrokes", text: `{"commands":[{"duration":1}]}`, err: "keystrokes"},
		{name: "negative duration", text: `{"commands":[{"keystrokes":"ls","duration":-1}]}`, err: "duration"},
		{name: "bad task_complete", text: `{"commands":[],"task_complete":"maybe"}`, err: "task_complete"},
		{name: "huge keystrokes", text: `{"commands":[{"keystrokes":"` + strings.Repeat("a", MaxKeystrokes+1) + `"}]}`, err: "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseReply(tc.text)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Commands) != tc.cmds || r.TaskComplete != tc.complete {
				t.Fatalf("reply %+v", r)
			}
			if got := strings.Join(r.Warnings, "; "); (tc.warn == "") != (got == "") || !strings.Contains(got, tc.warn) {
				t.Fatalf("warnings %q, want %q", got, tc.warn)
			}
			for _, c := range r.Commands {
				if c.Duration < 0 || c.Duration > MaxDuration {
					t.Fatalf("duration %v", c.Duration)
				}
			}
		})
	}
	r, _ := ParseReply(`{"commands":[{"keystrokes":"a"}]}`)
	if r.Commands[0].Duration != defaultDuration {
		t.Fatalf("default duration %v", r.Commands[0].Duration)
	}
}
