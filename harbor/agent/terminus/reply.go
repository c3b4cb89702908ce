package terminus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// Limits on one reply.
const (
	// MaxKeystrokes bounds one command's keystrokes (Harbor's limit).
	MaxKeystrokes = 16000
	// MaxCommands bounds the commands of one reply.
	MaxCommands = 64
	// MaxDuration caps one command's wait, in seconds.
	MaxDuration = 60
	// defaultDuration is a command's wait when the reply gives none.
	defaultDuration = 1.0
)

// Command is one entry of a reply's commands.
type Command struct {
	Keystrokes string  `json:"keystrokes"`
	Duration   float64 `json:"duration"`
}

// Reply is a parsed model answer.
type Reply struct {
	Analysis     string    `json:"analysis"`
	Plan         string    `json:"plan"`
	Commands     []Command `json:"commands"`
	TaskComplete bool      `json:"task_complete"`
	// Warnings are fixes made while parsing, told to the model.
	Warnings []string `json:"-"`
}

type rawReply struct {
	Analysis     string            `json:"analysis"`
	Plan         string            `json:"plan"`
	Commands     []json.RawMessage `json:"commands"`
	TaskComplete json.RawMessage   `json:"task_complete"`
}

// ParseReply finds the JSON object in a model's answer (text around it,
// a code fence or a thinking block are tolerated and noted) and checks it.
func ParseReply(text string) (*Reply, error) {
	var lastErr error
	for off := 0; ; {
		i := strings.IndexByte(text[off:], '{')
		if i < 0 {
			break
		}
		start := off + i
		dec := json.NewDecoder(strings.NewReader(text[start:]))
		var raw rawReply
		if err := dec.Decode(&raw); err != nil {
			if lastErr == nil {
				lastErr = err
			}
			off = start + 1
			continue
		}
		r, err := check(raw)
		if err != nil {
			return nil, err
		}
		before := strings.TrimSpace(stripThinking(text[:start]))
		before = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(before), "```json"))
		before = strings.TrimSpace(strings.TrimPrefix(before, "```"))
		after := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text[start+int(dec.InputOffset()):]), "```"))
		if before != "" || after != "" {
			r.Warnings = append(r.Warnings, "text outside the JSON object was ignored")
		}
		return r, nil
	}
	if lastErr != nil {
		return nil, fmt.Errorf("no valid JSON object (%v)", lastErr)
	}
	return nil, errors.New("no JSON object found")
}

func stripThinking(s string) string {
	if i := strings.Index(s, "</think>"); i >= 0 {
		return s[i+len("</think>"):]
	}
	return s
}

func check(raw rawReply) (*Reply, error) {
	r := &Reply{Analysis: raw.Analysis, Plan: raw.Plan}
	if len(raw.TaskComplete) > 0 && !bytes.Equal(raw.TaskComplete, []byte("null")) {
		var b bool
		var s string
		switch {
		case json.Unmarshal(raw.TaskComplete, &b) == nil:
			r.TaskComplete = b
		case json.Unmarshal(raw.TaskComplete, &s) == nil && (s == "true" || s == "false"):
			r.TaskComplete = s == "true"
			r.Warnings = append(r.Warnings, `"task_complete" should be true or false, not a string`)
		default:
			return nil, errors.New(`"task_complete" must be true or false`)
		}
	}
	if len(raw.Commands) > MaxCommands {
		r.Warnings = append(r.Warnings, fmt.Sprintf("only the first %d of %d commands were run", MaxCommands, len(raw.Commands)))
		raw.Commands = raw.Commands[:MaxCommands]
	}
	for i, rc := range raw.Commands {
		var c struct {
			Keystrokes *string         `json:"keystrokes"`
			Duration   json.RawMessage `json:"duration"`
		}
		if err := json.Unmarshal(rc, &c); err != nil || c.Keystrokes == nil {
			return nil, fmt.Errorf("command %d needs a \"keystrokes\" string", i+1)
		}
		cmd := Command{Keystrokes: *c.Keystrokes, Duration: defaultDuration}
		if len(c.Duration) > 0 && string(c.Duration) != "null" {
			if err := json.Unmarshal(c.Duration, &cmd.Duration); err != nil || math.IsNaN(cmd.Duration) || cmd.Duration < 0 {
				return nil, fmt.Errorf("command %d: \"duration\" must be a number of seconds", i+1)
			}
		}
		if cmd.Duration > MaxDuration {
			r.Warnings = append(r.Warnings, fmt.Sprintf("command %d: duration %g s capped at %d s", i+1, cmd.Duration, MaxDuration))
			cmd.Duration = MaxDuration
		}
		if n := utf8.RuneCountInString(cmd.Keystrokes); n > MaxKeystrokes {
			return nil, fmt.Errorf("command %d has %d characters of keystrokes, more than %d", i+1, n, MaxKeystrokes)
		}
		r.Commands = append(r.Commands, cmd)
	}
	return r, nil
}
