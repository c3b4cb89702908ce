package opensandbox

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berth-sh/berth/sandbox"
)

// TestParseResources: Kubernetes quantity forms as NeMo Gym and the SDKs
// write them.
func TestParseResources(t *testing.T) {
	for _, c := range []struct {
		in   map[string]string
		want sandbox.Resources
		bad  string
	}{
		{in: map[string]string{"cpu": "2", "memory": "8192Mi"}, want: sandbox.Resources{CPUs: 2, MemoryMB: 8192}},
		{in: map[string]string{"cpu": "500m", "memory": "2Gi", "ephemeral-storage": "20Gi"}, want: sandbox.Resources{CPUs: 0.5, MemoryMB: 2048, StorageMB: 20480}},
		{in: map[string]string{"cpu": "0.25", "memory": "512M"}, want: sandbox.Resources{CPUs: 0.25, MemoryMB: 489}},
		{in: map[string]string{"memory": "1"}, want: sandbox.Resources{MemoryMB: 1}}, // one byte rounds up to 1 MB
		{in: map[string]string{"gpu": "1", "gpu_type": "h100", "vendor.example/thing": "x"}, want: sandbox.Resources{GPUs: 1}},
		{in: map[string]string{"memory": "lots"}, bad: "memory"},
		{in: map[string]string{"cpu": "-1"}, bad: "negative"},
		{in: map[string]string{"memory": "9Ei"}, bad: "out of range"},
	} {
		got, err := ParseResources(c.in)
		if c.bad != "" {
			if err == nil || !strings.Contains(err.Error(), c.bad) || sandbox.ClassOf(err) != sandbox.InvalidArgument {
				t.Errorf("%v: error %v, want InvalidArgument with %q", c.in, err, c.bad)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%v: %+v %v, want %+v", c.in, got, err, c.want)
		}
	}
}

// TestLineEvents: output is sent a line an event without terminators, as
// upstream's execd splits it; a long line goes in bounded pieces.
func TestLineEvents(t *testing.T) {
	rec := httptest.NewRecorder()
	ew := newEventWriter(rec)
	l := &lineEvents{typ: EventStdout, ew: ew}
	for _, chunk := range []string{"a", "b\nc\r\n", "\n", "d\re", "\r", "\nlast"} {
		l.Write([]byte(chunk))
	}
	l.flush()
	l.Write([]byte(strings.Repeat("x", maxLineBytes+10)))
	l.flush()
	var texts []string
	for _, f := range strings.Split(strings.TrimSpace(rec.Body.String()), "\n\n") {
		i := strings.Index(f, `"text":"`)
		j := strings.Index(f, `","timestamp"`)
		texts = append(texts, f[i+8:j])
	}
	want := []string{"ab", "c", `\n`, "d", "e", "last", strings.Repeat("x", maxLineBytes), "xxxxxxxxxx"}
	if strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Fatalf("events %q, want %q", texts, want)
	}
}

// TestModeOf: upload modes are octal digits written as decimal numbers.
func TestModeOf(t *testing.T) {
	for in, want := range map[int]uint32{0: 0o644, 755: 0o755, 600: 0o600, 4755: 0o4755} {
		if got, err := modeOf(in); err != nil || uint32(got) != want {
			t.Errorf("mode %d: %o %v", in, got, err)
		}
	}
	for _, bad := range []int{8, 789, 17777, -1} {
		if _, err := modeOf(bad); err == nil {
			t.Errorf("mode %d accepted", bad)
		}
	}
}

// TestTableForgetsOldestFinished: the command table is bounded; a full
// table of running commands refuses more.
func TestTableForgetsOldestFinished(t *testing.T) {
	tb := newTable(2)
	a, b, c := &command{id: "a", running: true}, &command{id: "b", running: true}, &command{id: "c"}
	tb.add(a)
	tb.add(b)
	if err := tb.add(c); sandbox.ClassOf(err) != sandbox.ResourceExhausted {
		t.Fatalf("a third command with two running: %v", err)
	}
	b.finish(0, "")
	if err := tb.add(c); err != nil || tb.get("b") != nil || tb.get("a") == nil || tb.get("c") == nil {
		t.Fatalf("after b finished: %v a=%v b=%v c=%v", err, tb.get("a"), tb.get("b"), tb.get("c"))
	}
}
