package session

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/berth-sh/berth/session/testengine"
)

// TestConcurrentSessions is the concurrency line: 64 sessions of
// 20 turns at once (each with a retry and streaming turns). Every session's
// ids must be its own transcript's rendering, its text must name only
// itself, and its counters must be 0. Run it with -race.
func TestConcurrentSessions(t *testing.T) {
	const sessions, turns = 64, 20
	if testing.Short() {
		t.Skip("64 sessions x 20 turns: not in -short")
	}
	tag := func(c testengine.Call) string { return "S" + c.RoutingKey[:8] }
	e := newEnv(t, agentScript(tag), testengine.Options{}, nil)
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = e.create()
	}
	convs := make([]*conversation, sessions)
	// All 64 at once, whatever -parallel says: one goroutine per session.
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			convs[i] = e.runT(goroutineTB{t}, ids[i], "S"+ids[i][:8], turns,
				func(turn int) bool { return (turn+i)%3 == 0 },
				func(turn int) bool { return turn == 5+i%10 })
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	nl, _ := e.codec.Tok.Encode("\n")
	for i, id := range ids {
		info, err := e.client.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		acc := info.Metadata.AccumulatedTokenIDs
		want := transcriptIDs(t, e.codec, convs[i].msgs)
		if !slices.Equal(want, append(slices.Clone(acc), nl...)) {
			t.Errorf("session %d: ids are not its transcript (first difference at %d)", i, firstDiff(want, acc))
			continue
		}
		text, _ := e.codec.Tok.Decode(acc, false)
		own := "S" + id[:8]
		for j, other := range ids {
			if j != i && strings.Contains(text, "S"+other[:8]) {
				t.Errorf("session %d's ids mention session %d", i, j)
			}
		}
		if !strings.Contains(text, fmt.Sprintf("Finished %s", own)) {
			t.Errorf("session %d: its final answer is missing", i)
		}
		for _, typ := range []string{"special_token_count", "special_token_type", "non_assistant_text"} {
			if n := info.Metadata.MismatchCounts[typ]; n != 0 {
				t.Errorf("session %d: %s = %d", i, typ, n)
			}
		}
		if len(info.Records) != turns {
			t.Errorf("session %d: %d records", i, len(info.Records))
		}
	}
	if got := len(e.eng.Calls()); got != sessions*(turns+1) {
		t.Errorf("%d engine calls, want %d", got, sessions*(turns+1))
	}
}

// goroutineTB lets helpers that call Fatal run on goroutines other than
// the test's: Fatal records the failure and ends only that goroutine.
type goroutineTB struct{ testing.TB }

func (g goroutineTB) Fatal(args ...any)                 { g.Error(args...); runtime.Goexit() }
func (g goroutineTB) Fatalf(format string, args ...any) { g.Errorf(format, args...); runtime.Goexit() }
func (g goroutineTB) FailNow()                          { g.Fail(); runtime.Goexit() }
