package rollout

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"

	"github.com/berth-sh/berth/sandbox"
)

// Bounds of a NeMo Gym tasks file (JSON lines; a SWE-bench instance with its
// patches is tens of kilobytes).
const (
	MaxGymTaskLine = 64 << 20
	MaxGymTasks    = 1 << 20
)

// GymTask is one line of a NeMo Gym tasks file: an instance whose fields go
// to /run as they are (SWE-bench's instance_id, repo, base_commit,
// problem_statement, ..., and Gym's responses_create_params).
type GymTask struct {
	Line   int    // from 1
	ID     string // instance_id; "" when the line has none
	Fields map[string]json.RawMessage
}

// Field is a string field of the instance ("" when absent or not a string).
func (t *GymTask) Field(name string) string {
	var s string
	if raw, ok := t.Fields[name]; ok {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

// LoadGymTasks reads a tasks file: one JSON object a line, blank lines
// skipped. A line in Miles's format ({"prompt", "metadata": {instance}})
// stands for its metadata, which is what Miles sends to /run.
func LoadGymTasks(path string) ([]GymTask, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, sandbox.Classify(sandbox.InvalidArgument, err)
	}
	defer f.Close()
	var out []GymTask
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), MaxGymTaskLine)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if len(out) == MaxGymTasks {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, "%s: more than %d tasks", path, MaxGymTasks)
		}
		t, err := parseGymTask(line)
		if err != nil {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, "%s, line %d: %v", path, n, err)
		}
		t.Line = n
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, "%s, line %d: over %d bytes", path, n+1, MaxGymTaskLine)
		}
		return nil, sandbox.Classify(sandbox.InvalidArgument, err)
	}
	if len(out) == 0 {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "%s holds no task", path)
	}
	return out, nil
}

func parseGymTask(line []byte) (GymTask, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil || fields == nil {
		return GymTask{}, errors.New("not a JSON object")
	}
	if md, ok := fields["metadata"]; ok && fields["instance_id"] == nil {
		if _, prompt := fields["prompt"]; prompt {
			var inner map[string]json.RawMessage
			if json.Unmarshal(md, &inner) == nil && inner != nil {
				fields = inner
			}
		}
	}
	if raw, ok := fields["responses_create_params"]; ok && !isNull(raw) {
		var rcp map[string]json.RawMessage
		if json.Unmarshal(raw, &rcp) != nil || rcp == nil {
			return GymTask{}, errors.New("responses_create_params is not a JSON object")
		}
	}
	t := GymTask{Fields: fields}
	if raw, ok := fields["instance_id"]; ok && !isNull(raw) {
		if json.Unmarshal(raw, &t.ID) != nil {
			return GymTask{}, errors.New("instance_id is not a string")
		}
	}
	return t, nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// Sampling are the rollout's sampling settings, which Gym's agent reads
// from responses_create_params only (nil: Gym's default).
type Sampling struct {
	Temperature     *float64 `json:"temperature,omitempty"`
	TopP            *float64 `json:"top_p,omitempty"`
	MaxOutputTokens *int     `json:"max_output_tokens,omitempty"`
}

// runBody is the body of POST /run for one sample: the task's fields,
// responses_create_params with the rollout's sampling settings over the
// task's own (input [] when it has none), and the session as the policy.
// A policy_base_url or policy_api_key of the task is replaced: the task
// file does not choose where the model calls go.
func (t *GymTask) runBody(s Sampling, policyURL, policyKey string) ([]byte, error) {
	m := maps.Clone(t.Fields)
	rcp := map[string]json.RawMessage{}
	if raw, ok := m["responses_create_params"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &rcp); err != nil {
			return nil, err
		}
	}
	if raw, ok := rcp["input"]; !ok || isNull(raw) {
		rcp["input"] = json.RawMessage("[]")
	}
	set := func(k string, v any) {
		b, _ := json.Marshal(v)
		rcp[k] = b
	}
	if s.Temperature != nil {
		set("temperature", *s.Temperature)
	}
	if s.TopP != nil {
		set("top_p", *s.TopP)
	}
	if s.MaxOutputTokens != nil {
		set("max_output_tokens", *s.MaxOutputTokens)
	}
	var err error
	if m["responses_create_params"], err = json.Marshal(rcp); err != nil {
		return nil, err
	}
	m["policy_base_url"], _ = json.Marshal(policyURL)
	delete(m, "policy_api_key")
	if policyKey != "" {
		m["policy_api_key"], _ = json.Marshal(policyKey)
	}
	return json.Marshal(m)
}

// gymTrialName is a sample's directory name: the instance id made safe for
// a file name (letters, digits, '.', '_', '-'; not starting with '.'), cut
// at 32, then "__" and a random id. The id is the task file's choice.
func gymTrialName(t *GymTask, id string) string {
	base := t.ID
	if base == "" {
		base = fmt.Sprintf("line-%d", t.Line)
	}
	var b strings.Builder
	for _, r := range base {
		if b.Len() >= 32 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		case r == '.' && b.Len() > 0:
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String() + "__" + id
}

// gymTaskName is the instance id as result.json records it (bounded), or
// the line when there is none.
func gymTaskName(t *GymTask) string {
	if t.ID == "" {
		return fmt.Sprintf("line-%d", t.Line)
	}
	if len(t.ID) > 256 {
		return strings.ToValidUTF8(t.ID[:256], "")
	}
	return t.ID
}
