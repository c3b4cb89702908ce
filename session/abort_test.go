package session

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/sandbox/errdefs"
	"github.com/berth-sh/berth/session/samples"
	"github.com/berth-sh/berth/session/testengine"
)

// TestAbortMidTurn: a session aborted while its second turn is with the
// engine: the engine's request is cancelled (its context ends), the turn
// is answered 410 with the reason and not recorded, later turns are
// refused before the engine, and the samples are ABORTED with the reason
// in their metadata and the session's.
func TestAbortMidTurn(t *testing.T) {
	entered, cancelled := make(chan struct{}), make(chan struct{})
	e := newEnv(t, func(c testengine.Call) testengine.Reply {
		if c.N == 2 {
			close(entered)
			select {
			case <-c.Ctx.Done():
				close(cancelled)
			case <-time.After(20 * time.Second):
			}
			return testengine.Reply{Text: "too late"}
		}
		return testengine.Reply{Text: "first answer"}
	}, testengine.Options{}, nil)
	id := e.create()
	u := map[string]any{"role": "user", "content": "hi"}
	a1 := e.chat(id, []any{u}, nil, false)
	type reply struct {
		status int
		body   []byte
	}
	got := make(chan reply, 1)
	go func() {
		status, body := e.postT(t, "/sessions/"+id+"/v1/chat/completions", map[string]any{"messages": []any{u, a1, map[string]any{"role": "user", "content": "again"}}})
		got <- reply{status, body}
	}()
	<-entered
	const reason = "max samples (8) reached"
	if err := e.client.Abort(t.Context(), id, reason); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the engine call was not cancelled")
	}
	r := <-got
	if r.status != http.StatusGone || errorOf(t, r.body) != "session aborted: "+reason || !strings.Contains(string(r.body), `"abort_reason":"`+reason+`"`) {
		t.Fatalf("the in-flight turn: %d %s", r.status, r.body)
	}
	calls := len(e.eng.Calls())
	if status, body := e.post("/sessions/"+id+"/v1/chat/completions", map[string]any{"messages": []any{u}}); status != http.StatusGone || len(e.eng.Calls()) != calls {
		t.Fatalf("a turn after the abort: %d %s (%d engine calls, %d before)", status, body, len(e.eng.Calls()), calls)
	}
	info, err := e.client.Get(t.Context(), id)
	if err != nil || len(info.Records) != 1 || info.Metadata.AbortReason != reason {
		t.Fatalf("after the abort: %v, %d records, reason %q", err, len(info.Records), info.Metadata.AbortReason)
	}
	p, err := e.client.Samples(t.Context(), id, 0)
	if err != nil || len(p.Samples) != 1 {
		t.Fatal(err)
	}
	if s := p.Samples[0]; s.Status != samples.Aborted || s.Metadata["abort_reason"] != reason {
		t.Fatalf("sample %s %v", s.Status, s.Metadata["abort_reason"])
	}
	if got, err := e.client.WaitAbort(t.Context(), id); err != nil || got != reason {
		t.Fatalf("WaitAbort: %q %v", got, err)
	}
	// A second abort keeps the first reason.
	if err := e.client.Abort(t.Context(), id, "other"); err != nil || e.srv.sessions[id].ab.reasonOf() != reason {
		t.Fatalf("second abort: %v %q", err, e.srv.sessions[id].ab.reasonOf())
	}
	if m := e.metricsText(t); !strings.Contains(m, `berth_session_turns_total{outcome="aborted"} 2`) {
		t.Errorf("the two aborted turns are not counted:\n%s", m)
	}
}

// TestAbortAll is a trainer's abort hook on the session server: the body
// Miles's Harbor hook posts to /flush ({"session_server_instance_id"})
// aborts every session of this instance (a linear one, a tree and its
// fork), and only of this one; a waiter learns the reason as it happens;
// the tree's leaves are ABORTED; a session created after is not.
func TestAbortAll(t *testing.T) {
	e := newEnv(t, func(testengine.Call) testengine.Reply { return testengine.Reply{Text: "ok"} }, testengine.Options{},
		func(o *Options) { o.InstanceID = "inst-1" })
	lin := e.create()
	tree, _ := e.client.CreateTree(t.Context())
	u := map[string]any{"role": "user", "content": "hi"}
	a1 := e.chat(tree, []any{u}, nil, false)
	fork, err := e.client.Fork(t.Context(), tree, 1)
	if err != nil {
		t.Fatal(err)
	}
	e.chat(fork, []any{u, a1, map[string]any{"role": "user", "content": "fork"}}, nil, false)
	e.chat(tree, []any{u, a1, map[string]any{"role": "user", "content": "root"}}, nil, false)

	// The waiter's ask may reach the server before the abort or after it:
	// either way it gets the reason.
	waited := make(chan string, 1)
	go func() {
		r, err := e.client.WaitAbort(t.Context(), lin)
		if err != nil {
			r = "error: " + err.Error()
		}
		waited <- r
	}()
	status, body := e.post("/flush", map[string]any{"session_server_instance_id": "inst-2"})
	if status != http.StatusOK || !strings.Contains(string(body), `"aborted":0`) {
		t.Fatalf("another instance's flush: %d %s", status, body)
	}
	status, body = e.post("/flush", map[string]any{"session_server_instance_id": "inst-1", "reason": "rollout step done"})
	if status != http.StatusOK || !strings.Contains(string(body), `"aborted":3`) {
		t.Fatalf("flush: %d %s", status, body)
	}
	select {
	case r := <-waited:
		if r != "rollout step done" {
			t.Fatalf("the waiter got %q", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken")
	}
	p, err := e.client.TreeSamples(t.Context(), tree, LeafRequest{})
	if err != nil || len(p.Samples) != 2 {
		t.Fatalf("tree samples: %v", err)
	}
	for _, s := range p.Samples {
		if s.Status != samples.Aborted || s.Metadata["abort_reason"] != "rollout step done" {
			t.Errorf("leaf sample %s %v", s.Status, s.Metadata["abort_reason"])
		}
	}
	later := e.create()
	e.chat(later, []any{u}, nil, false)
	if n, err := e.client.AbortAll(t.Context(), ""); err != nil || n != 1 || e.srv.sessions[later].ab.reasonOf() != DefaultAbortReason {
		t.Fatalf("AbortAll: %d %v", n, err)
	}
	// Waiting on a session deleted meanwhile (or before the wait is
	// asked) ends with NotFound.
	gone := e.create()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { _, err := e.client.WaitAbort(ctx, gone); errc <- err }()
	e.client.Delete(t.Context(), gone)
	if err := <-errc; !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("waiting on a deleted session: %v", err)
	}
}

// TestEngineAbortedTurnIsNotContinued: a turn the engine itself aborted
// (finish_reason "abort", what SGLang answers after abort_request) is
// recorded, its sample is ABORTED, and continuing it is refused in both
// versions (409: Miles refuses partial rollouts), while retrying it works.
func TestEngineAbortedTurnIsNotContinued(t *testing.T) {
	e := newEnv(t, func(c testengine.Call) testengine.Reply {
		if c.N == 1 {
			return testengine.Reply{Text: "half an ans", FinishReason: "abort"}
		}
		return testengine.Reply{Text: "a whole answer"}
	}, testengine.Options{}, nil)
	u := map[string]any{"role": "user", "content": "hi"}
	for _, create := range []func() string{e.create, func() string { id, _ := e.client.CreateTree(t.Context()); return id }} {
		id := create()
		a1 := e.chat(id, []any{u}, nil, false)
		p, err := e.client.Samples(t.Context(), id, 0)
		if err != nil || p.Samples[0].Status != samples.Aborted {
			t.Fatalf("the engine-aborted turn's sample: %v", err)
		}
		status, body := e.post("/sessions/"+id+"/v1/chat/completions", map[string]any{"messages": []any{u, a1, map[string]any{"role": "user", "content": "go on"}}})
		if status != http.StatusConflict || !strings.Contains(errorOf(t, body), "partial") {
			t.Fatalf("continuing it: %d %s", status, body)
		}
		e.chat(id, []any{u}, nil, false) // the retry
		p, err = e.client.Samples(t.Context(), id, 0)
		if err != nil || p.Samples[0].Status != samples.Completed {
			t.Fatalf("after the retry: %v %+v", err, p.Samples)
		}
	}
}
