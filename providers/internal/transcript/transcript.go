package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
)

// Entry is one call, as shape.
type Entry struct {
	Method string // HTTP method, or the RPC's name
	Route  string // the path with IDs as placeholders; "" for an RPC
	Status string // "200", "NotFound"
	// Request and Response are the field names of the bodies, nested ones
	// as dotted paths, array elements as "[]": sorted, without values.
	Request, Response []string
}

// String is the entry's line in a transcript file.
func (e Entry) String() string {
	return fmt.Sprintf("%s %s %s req{%s} resp{%s}", e.Method, e.Route, e.Status,
		strings.Join(e.Request, ","), strings.Join(e.Response, ","))
}

// key is the call an entry is about, without its shapes.
func (e Entry) key() string { return e.Method + " " + e.Route + " " + e.Status }

// Transcript is the entries of a run, in order. It is safe for concurrent
// use.
type Transcript struct {
	mu      sync.Mutex
	entries []Entry
}

// Add appends an entry.
func (t *Transcript) Add(e Entry) {
	t.mu.Lock()
	t.entries = append(t.entries, e)
	t.mu.Unlock()
}

// Reset forgets the entries so far: what a run did to warm up (an image
// build, cached by the service from then on) is not the scenario.
func (t *Transcript) Reset() {
	t.mu.Lock()
	t.entries = nil
	t.mu.Unlock()
}

// Entries returns the entries so far.
func (t *Transcript) Entries() []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.entries)
}

// WriteFile writes the transcript, one entry a line.
func (t *Transcript) WriteFile(path string) error {
	var b bytes.Buffer
	for _, e := range t.Entries() {
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// Diff compares two runs of one scenario as sets of calls: the calls one
// made and the other did not, and the calls both made with other field
// sets (a field is the union over the calls' entries, since a polled call
// answers a little more once a sandbox runs). Order and repetition do not
// count: polling differs from run to run. skip leaves entries out, such
// as throttled calls that were retried.
func Diff(want, got *Transcript, skip func(Entry) bool) []string {
	a, b := shapes(want, skip), shapes(got, skip)
	var out []string
	for _, k := range slices.Sorted(maps.Keys(a)) {
		sb, ok := b[k]
		if !ok {
			out = append(out, "only in the first: "+k)
			continue
		}
		sa := a[k]
		for _, part := range []struct {
			name string
			x, y map[string]bool
		}{{"request", sa.req, sb.req}, {"response", sa.resp, sb.resp}} {
			if missing := minus(part.x, part.y); len(missing) > 0 {
				out = append(out, fmt.Sprintf("%s: %s fields only in the first: %s", k, part.name, strings.Join(missing, ",")))
			}
			if extra := minus(part.y, part.x); len(extra) > 0 {
				out = append(out, fmt.Sprintf("%s: %s fields only in the second: %s", k, part.name, strings.Join(extra, ",")))
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b)) {
		if _, ok := a[k]; !ok {
			out = append(out, "only in the second: "+k)
		}
	}
	return out
}

type shape struct{ req, resp map[string]bool }

func shapes(t *Transcript, skip func(Entry) bool) map[string]shape {
	m := map[string]shape{}
	for _, e := range t.Entries() {
		if skip != nil && skip(e) {
			continue
		}
		s, ok := m[e.key()]
		if !ok {
			s = shape{req: map[string]bool{}, resp: map[string]bool{}}
			m[e.key()] = s
		}
		for _, f := range e.Request {
			s.req[f] = true
		}
		for _, f := range e.Response {
			s.resp[f] = true
		}
	}
	return m
}

func minus(x, y map[string]bool) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(x)) {
		if !y[k] {
			out = append(out, k)
		}
	}
	return out
}

// JSONFields returns the field paths of a JSON body: "a", "a.b", "items[].id".
// Keys of objects that are maps (labels, env) are data, not fields: an
// object under a key listed in dataKeys is recorded as the key alone. A
// body that is not JSON has no fields.
func JSONFields(body []byte, dataKeys ...string) []string {
	var v any
	if len(bytes.TrimSpace(body)) == 0 || json.Unmarshal(body, &v) != nil {
		return nil
	}
	set := map[string]bool{}
	walk(v, "", set, dataKeys)
	return slices.Sorted(maps.Keys(set))
}

func walk(v any, prefix string, set map[string]bool, dataKeys []string) {
	switch x := v.(type) {
	case map[string]any:
		for k, sub := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			set[p] = true
			if !slices.Contains(dataKeys, k) {
				walk(sub, p, set, dataKeys)
			}
		}
	case []any:
		for _, sub := range x {
			walk(sub, prefix+"[]", set, dataKeys)
		}
	}
}
