package osbserve

import (
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testing/waitfor"
	"github.com/berth-sh/berth/serve/internal/core"
	"github.com/berth-sh/berth/serve/internal/servetest"
	"github.com/berth-sh/berth/serve/opensandbox"
)

// osbExecd is the execd endpoint of a new sandbox of key.
type osbExecd struct {
	e         *testEnv
	id, base  string
	hdr       map[string]string
	key, keyI string
}

func (e *testEnv) osbExecdOf(key string) osbExecd {
	e.T.Helper()
	sb := e.OSBCreate(key, servetest.OSBImageBody(nil))
	base, hdr := e.OSBEndpoint(key, sb.ID, opensandbox.ExecdPort)
	return osbExecd{e: e, id: sb.ID, base: base, hdr: hdr, key: key, keyI: e.C.Get(sb.ID).KeyID}
}

// execd is the server's execd of the sandbox.
func (x osbExecd) execd() *opensandbox.Execd {
	x.e.osb.mu.Lock()
	b := x.e.osb.byID[x.id]
	x.e.osb.mu.Unlock()
	_, _, _, _, execd := b.snapshot()
	return execd
}

// background starts script as a background command and returns its id.
func (x osbExecd) background(script string) string {
	x.e.T.Helper()
	r := x.e.Execd("POST", x.base, x.hdr, "", "/command", map[string]any{"command": script, "background": true})
	res := servetest.Digest(x.e.T, servetest.Events(x.e.T, r.Body))
	if r.Status != http.StatusOK || res.ID == "" {
		x.e.T.Fatalf("background %q: %d %s", script, r.Status, r.Body)
	}
	return res.ID
}

// waitDone waits until the command is no longer running.
func (x osbExecd) waitDone(id string) {
	x.e.T.Helper()
	waitfor.Until(x.e.T, 2*time.Minute, "command "+id+" finished", func() bool {
		var st opensandbox.CommandStatus
		x.e.Execd("GET", x.base, x.hdr, "", "/command/status/"+id, nil).JSON(x.e.T, &st)
		return !st.Running && st.ExitCode != nil
	})
}

// logs reads a command's logs from cursor: the body, the next cursor and
// the bytes the answer says are dropped.
func (x osbExecd) logs(id string, cursor int64) (string, int64, int64) {
	x.e.T.Helper()
	r := x.e.Execd("GET", x.base, x.hdr, "", fmt.Sprintf("/command/%s/logs?cursor=%d", id, cursor), nil)
	if r.Status != http.StatusOK {
		x.e.T.Fatalf("logs of %s: %d %s", id, r.Status, r.Body)
	}
	next, err1 := strconv.ParseInt(r.Header.Get(opensandbox.TailCursorHeader), 10, 64)
	dropped, err2 := strconv.ParseInt(r.Header.Get(opensandbox.DroppedHeader), 10, 64)
	if err1 != nil || err2 != nil {
		x.e.T.Fatalf("logs of %s: headers %v", id, r.Header)
	}
	return string(r.Body), next, dropped
}

// TestOpenSandboxOutputFloodBounded: background commands that each write
// far more than the bounds keep, in two sandboxes of one key, leave the
// server holding at most the per-sandbox and per-key bounds; every logs
// answer says what it dropped (dropped + answered = the whole output), the
// newest output is the one kept, and another key's quiet command keeps
// all of its output. On 5553f78 each command kept its first 16 MiB and a
// sandbox its last 1024 commands, with no bound per sandbox or key: the
// 16 commands here left 16 MiB answered by their logs calls against the
// 384 KiB budget (the review's 40 commands of 16 MiB took serve from
// 66 MB to 1.36 GB RSS), and no answer said anything was dropped.
func TestOpenSandboxOutputFloodBounded(t *testing.T) {
	const perCmd, perSandbox, perKey = 64 << 10, 256 << 10, 384 << 10
	e := newEnv(t, func(o *core.Options) {
		o.OpenSandbox.MaxLogBytesPerCommand, o.OpenSandbox.MaxLogBytesPerSandbox, o.OpenSandbox.MaxLogBytesPerKey = perCmd, perSandbox, perKey
	}, nil)
	quiet := e.osbExecdOf(otherKey)
	qid := quiet.background("echo quiet")
	quiet.waitDone(qid)
	flood := []osbExecd{e.osbExecdOf(testKey), e.osbExecdOf(testKey)}
	// One command at a time, so that which were written least recently is
	// known: sandbox 0's first, then sandbox 1's.
	const each, n = 1 << 20, 8 // bytes a command writes before its end marker
	ids := make([][]string, len(flood))
	for i, x := range flood {
		for j := range n {
			id := x.background(fmt.Sprintf("yes | head -c %d; echo END-%d", each, j))
			x.waitDone(id)
			ids[i] = append(ids[i], id)
		}
	}
	// Sandbox 1 keeps its last 4 commands (its bound), and the key's bound
	// leaves sandbox 0 the 2 it wrote last.
	keeps := func(i, j int) bool { return (i == 1 && j >= n-4) || (i == 0 && j >= n-2) }
	var answered int64
	for i, x := range flood {
		for j, id := range ids[i] {
			body, next, dropped := x.logs(id, 0)
			total := int64(each + len(fmt.Sprintf("END-%d\n", j)))
			want := 0
			if keeps(i, j) {
				want = perCmd
			}
			if next != total || dropped+int64(len(body)) != total || len(body) != want {
				t.Errorf("sandbox %d command %d: %d bytes answered, %d dropped, cursor %d; want %d of %d", i, j, len(body), dropped, next, want, total)
			}
			if want > 0 && !strings.HasSuffix(body, fmt.Sprintf("y\nEND-%d\n", j)) {
				t.Errorf("sandbox %d command %d: the kept output is not its tail: ...%q", i, j, body[max(0, len(body)-20):])
			}
			// From a cursor in what is kept, nothing is dropped.
			if want > 0 {
				if tail, _, d := x.logs(id, total-10); d != 0 || len(tail) != 10 {
					t.Errorf("sandbox %d command %d: from 10 before the end: %q, %d dropped", i, j, tail, d)
				}
			}
			answered += int64(len(body))
		}
	}
	budget := e.osb.budget(flood[0].keyI)
	for i, x := range flood {
		if got := x.execd().Retained(); got > perSandbox {
			t.Errorf("sandbox %d keeps %d bytes, over its %d", i, got, perSandbox)
		}
	}
	if got := budget.Retained(); got > perKey || answered > perKey || got != answered {
		t.Errorf("the key keeps %d bytes and its logs answered %d; the bound is %d", got, answered, perKey)
	}
	if body, next, dropped := quiet.logs(qid, 0); body != "quiet\n" || next != 6 || dropped != 0 {
		t.Fatalf("another key's command: %q %d %d", body, next, dropped)
	}
	// Deleting a sandbox gives its share back to the key.
	before := budget.Retained()
	share := flood[0].execd().Retained()
	if r := e.OSBCall("DELETE", "/v1/sandboxes/"+flood[0].id, testKey, nil, nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if got := budget.Retained(); share == 0 || got != before-share {
		t.Fatalf("after the delete the key keeps %d bytes, want %d - %d", got, before, share)
	}
}

// BenchmarkOpenSandboxOutputFlood is the review's attack at the default
// bounds: one key's 40 background commands of 16 MiB each, 10 at once in
// each of 4 sandboxes. It reports what the key keeps (at most 256 MiB) and
// how much the process grew: Go's heap in use after a GC, the resident
// set, and its peak (VmHWM). The resident rows mean something for the
// first iteration of a process only (-benchtime 1x, one process a run):
// later ones reuse pages the runtime kept.
func BenchmarkOpenSandboxOutputFlood(b *testing.B) {
	e := newEnv(b, nil, nil)
	for b.Loop() {
		heap0, rss0 := heapInuse(), procStatusKB("VmRSS")
		var xs []osbExecd
		for range 4 {
			xs = append(xs, e.osbExecdOf(testKey))
		}
		var wg sync.WaitGroup
		for _, x := range xs {
			wg.Go(func() {
				var ids []string
				for range 10 {
					ids = append(ids, x.background("yes | head -c 16777216"))
				}
				for _, id := range ids {
					x.waitDone(id)
				}
			})
		}
		wg.Wait()
		kept := e.osb.budget(xs[0].keyI).Retained()
		heap, rss, peak := heapInuse(), procStatusKB("VmRSS"), procStatusKB("VmHWM")
		b.ReportMetric(float64(kept)/(1<<20), "kept-MiB")
		b.ReportMetric(float64(heap-heap0)/(1<<20), "heap-growth-MiB")
		b.ReportMetric(float64(rss-rss0)/1024, "rss-growth-MiB")
		b.ReportMetric(float64(peak-rss0)/1024, "peak-rss-growth-MiB")
		for _, x := range xs {
			e.OSBCall("DELETE", "/v1/sandboxes/"+x.id, testKey, nil, nil)
		}
	}
}

// heapInuse is Go's heap in use after a collection.
func heapInuse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// procStatusKB reads one kB field of /proc/self/status (0 when absent).
func procStatusKB(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
