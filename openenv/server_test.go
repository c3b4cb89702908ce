package openenv_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/berth-sh/berth/openenv"
)

// counterEnv is a small environment: step adds the action's n to a total;
// an action with n 13 fails; reset sets the total to the reset's start.
type counterEnv struct {
	total   int
	closed  *atomic.Int32
	stepped chan struct{} // when set, Step waits here (a long action)
}

var counterInfo = openenv.Info{
	Name:        "counter",
	Action:      &openenv.Model{Title: "CounterAction", Fields: []openenv.Field{{Name: "n", Kind: openenv.Integer, Required: true}}},
	Observation: &openenv.Model{Title: "CounterObservation", Fields: []openenv.Field{{Name: "total", Kind: openenv.Integer, Default: 0}}},
	State:       &openenv.Model{Title: "CounterState", AllowExtra: true, Fields: []openenv.Field{{Name: "total", Kind: openenv.Integer, Default: 0}}},
}

func (e *counterEnv) Reset(_ context.Context, args map[string]json.RawMessage) (*openenv.Observation, error) {
	start := 0
	if s, ok := args["start"]; ok {
		if err := json.Unmarshal(s, &start); err != nil {
			return nil, fmt.Errorf("start must be a number")
		}
	}
	e.total = start
	return &openenv.Observation{Fields: map[string]int{"total": e.total}}, nil
}

func (e *counterEnv) Step(ctx context.Context, raw json.RawMessage) (*openenv.Observation, error) {
	var a struct{ N int }
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, err
	}
	if e.stepped != nil {
		select {
		case <-e.stepped:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if a.N == 13 {
		return nil, errors.New("unlucky")
	}
	e.total += a.N
	r := float64(e.total)
	return &openenv.Observation{Fields: map[string]int{"total": e.total}, Reward: &r, Done: e.total >= 100}, nil
}

func (e *counterEnv) State(context.Context) (any, error) {
	return map[string]int{"total": e.total}, nil
}

func (e *counterEnv) Close(context.Context) error {
	e.closed.Add(1)
	return nil
}

type fixture struct {
	srv    *openenv.Server
	url    string
	closed atomic.Int32
	made   atomic.Int32
}

func start(t *testing.T, mod func(*openenv.Options, *fixture)) *fixture {
	t.Helper()
	f := &fixture{}
	opts := openenv.Options{Info: counterInfo, MaxConcurrentEnvs: 2, Factory: func(context.Context) (openenv.Env, error) {
		f.made.Add(1)
		return &counterEnv{closed: &f.closed}, nil
	}}
	if mod != nil {
		mod(&opts, f)
	}
	srv, err := openenv.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Close(); hs.Close() })
	f.srv, f.url = srv, hs.URL
	return f
}

// raw is a WebSocket to /ws that sends and reads frames as text.
type raw struct {
	t *testing.T
	c *websocket.Conn
}

func dialRaw(t *testing.T, base string) *raw {
	t.Helper()
	c, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(base, "http")+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return &raw{t, c}
}

func (r *raw) send(s string) string {
	r.t.Helper()
	if err := r.c.Write(r.t.Context(), websocket.MessageText, []byte(s)); err != nil {
		r.t.Fatal(err)
	}
	return r.read()
}

func (r *raw) read() string {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.t.Context(), 10*time.Second)
	defer cancel()
	_, b, err := r.c.Read(ctx)
	if err != nil {
		r.t.Fatalf("read: %v", err)
	}
	return string(b)
}

// closed waits for the server to close the connection and returns how.
func (r *raw) closed() websocket.StatusCode {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.t.Context(), 10*time.Second)
	defer cancel()
	for {
		if _, b, err := r.c.Read(ctx); err != nil {
			return websocket.CloseStatus(err)
		} else {
			r.t.Fatalf("frame %s where a close was expected", b)
		}
	}
}

func TestSessionFrames(t *testing.T) {
	f := start(t, nil)
	c := dialRaw(t, f.url)
	for _, tc := range []struct{ send, want string }{
		{`{"type": "reset", "data": {"start": 5}}`, `{"type":"observation","data":{"observation":{"total":5},"reward":null,"done":false}}`},
		{`{"type": "step", "data": {"n": 2}}`, `{"type":"observation","data":{"observation":{"total":7},"reward":7.0,"done":false}}`},
		{`{"type": "state"}`, `{"type":"state","data":{"total":7}}`},
		{`{"type": "step", "data": {"n": 13}}`, `{"type":"error","data":{"message":"unlucky","code":"EXECUTION_ERROR"}}`},
		{`{"type": "step", "data": {"n": "x", "m": 1}}`, `{"type":"error","data":{"message":"Invalid message","code":"VALIDATION_ERROR","errors":[` +
			`{"type":"int_type","loc":["n"],"msg":"Input should be a valid integer","input":"x"},` +
			`{"type":"extra_forbidden","loc":["m"],"msg":"Extra inputs are not permitted","input":1}]}}`},
		{`{"type": "step"}`, `{"type":"error","data":{"message":"Invalid message","code":"VALIDATION_ERROR","errors":[` +
			`{"type":"missing","loc":["data"],"msg":"Field required","input":{"type":"step"}}]}}`},
		{`{"type": "state", "data": {}}`, `{"type":"error","data":{"message":"Invalid message","code":"VALIDATION_ERROR","errors":[` +
			`{"type":"extra_forbidden","loc":["data"],"msg":"Extra inputs are not permitted","input":{}}]}}`},
		{`{"type": "reset", "data": {"start": "x"}}`, `{"type":"error","data":{"message":"start must be a number","code":"EXECUTION_ERROR"}}`},
		{`{"type": "ping"}`, `{"type":"error","data":{"message":"Unknown message type: ping","code":"UNKNOWN_TYPE"}}`},
		{`{"data": {}}`, `{"type":"error","data":{"message":"Unknown message type: ","code":"UNKNOWN_TYPE"}}`},
		{`{"type": 7}`, `{"type":"error","data":{"message":"Unknown message type: 7","code":"UNKNOWN_TYPE"}}`},
	} {
		if got := c.send(tc.send); got != tc.want {
			t.Errorf("%s\n got %s\nwant %s", tc.send, got, tc.want)
		}
	}
	// Malformed JSON is answered and the session goes on.
	got := c.send(`{"type": "step", "data": `)
	var e openenv.Frame
	if err := json.Unmarshal([]byte(got), &e); err != nil || e.Type != "error" || !strings.Contains(string(e.Data), `"code":"INVALID_JSON"`) ||
		!strings.Contains(string(e.Data), `"message":"Invalid JSON: `) {
		t.Errorf("malformed frame answered %s", got)
	}
	if got := c.send(`{"type": "state"}`); got != `{"type":"state","data":{"total":7}}` {
		t.Errorf("state after a malformed frame: %s", got)
	}
	// Close: the environment is closed before the connection.
	if err := c.c.Write(t.Context(), websocket.MessageText, []byte(`{"type": "close"}`)); err != nil {
		t.Fatal(err)
	}
	if s := c.closed(); s != websocket.StatusNormalClosure {
		t.Errorf("close message: connection closed with %v", s)
	}
	if n := f.closed.Load(); n != 1 {
		t.Errorf("environment closed %d times by the time the connection closed", n)
	}
}

// A frame that is JSON but not an object ends the session with
// SESSION_ERROR, as OpenEnv's server does.
func TestNonObjectFrameEndsSession(t *testing.T) {
	f := start(t, nil)
	for _, frame := range []string{`[1, 2]`, `"reset"`, `null`} {
		c := dialRaw(t, f.url)
		if got := c.send(frame); !strings.Contains(got, `"code":"SESSION_ERROR"`) {
			t.Errorf("%s answered %s", frame, got)
		}
		if s := c.closed(); s != websocket.StatusPolicyViolation {
			t.Errorf("%s: closed with %v", frame, s)
		}
	}
	waitFor(t, func() bool { return f.closed.Load() == 3 && f.srv.Active() == 0 })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCapacityReached(t *testing.T) {
	f := start(t, nil)
	a, b := dialRaw(t, f.url), dialRaw(t, f.url)
	a.send(`{"type":"reset"}`)
	b.send(`{"type":"reset"}`)
	c := dialRaw(t, f.url)
	want := `{"type":"error","data":{"message":"Server at capacity: 2/2 sessions active. Cannot accept new connections.","code":"CAPACITY_REACHED","active_sessions":2,"max_sessions":2}}`
	if got := c.read(); got != want {
		t.Errorf("third session:\n got %s\nwant %s", got, want)
	}
	if s := c.closed(); s != websocket.StatusNormalClosure {
		t.Errorf("refused session closed with %v", s)
	}
	if n := f.made.Load(); n != 2 {
		t.Errorf("%d environments made; the refused session must make none", n)
	}
}

// The client waits for a slot: CAPACITY_REACHED is retried with jitter
// until another session closes, and then the episode runs.
func TestClientWaitsForCapacity(t *testing.T) {
	f := start(t, func(o *openenv.Options, _ *fixture) { o.MaxConcurrentEnvs = 1 })
	holder, err := openenv.NewClient(f.url, openenv.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Reset(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	impatient, _ := openenv.NewClient(f.url, openenv.ClientOptions{})
	_, err = impatient.Reset(t.Context(), nil)
	var se *openenv.ServerError
	if !errors.As(err, &se) || se.Code != openenv.CapacityReached || string(se.Data["max_sessions"]) != "1" {
		t.Fatalf("without retries: %v", err)
	}
	patient, _ := openenv.NewClient(f.url, openenv.ClientOptions{
		CapacityWait: 30 * time.Second, CapacityBackoff: [2]time.Duration{20 * time.Millisecond, 50 * time.Millisecond},
	})
	defer patient.Close()
	done := make(chan error, 1)
	go func() {
		r, err := patient.Reset(t.Context(), map[string]any{"start": 40})
		if err == nil && string(r.Observation) != `{"total":40}` {
			err = fmt.Errorf("observation %s", r.Observation)
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("reset returned while the only slot was held: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r, err := patient.Step(t.Context(), map[string]int{"n": 60})
	if err != nil || !r.Done || r.Reward == nil || *r.Reward != 100 {
		t.Fatalf("step after the wait: %+v, %v", r, err)
	}
}

// A client that goes away mid-action cancels the action and its session's
// environment is closed.
func TestDisconnectMidStepClosesEnv(t *testing.T) {
	block := make(chan struct{})
	var cancelled atomic.Bool
	f := start(t, func(o *openenv.Options, f *fixture) {
		o.Factory = func(context.Context) (openenv.Env, error) {
			return &ctxEnv{counterEnv{closed: &f.closed, stepped: block}, &cancelled}, nil
		}
	})
	c := dialRaw(t, f.url)
	c.send(`{"type":"reset"}`)
	if err := c.c.Write(t.Context(), websocket.MessageText, []byte(`{"type":"step","data":{"n":1}}`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	c.c.CloseNow()
	waitFor(t, func() bool { return f.closed.Load() == 1 && f.srv.Active() == 0 })
	if !cancelled.Load() {
		t.Error("the step in flight was not cancelled when its client left")
	}
}

type ctxEnv struct {
	counterEnv
	cancelled *atomic.Bool
}

func (e *ctxEnv) Step(ctx context.Context, raw json.RawMessage) (*openenv.Observation, error) {
	o, err := e.counterEnv.Step(ctx, raw)
	if ctx.Err() != nil {
		e.cancelled.Store(true)
	}
	return o, err
}

func TestIdleTimeoutClosesSession(t *testing.T) {
	f := start(t, func(o *openenv.Options, _ *fixture) { o.IdleTimeout = 200 * time.Millisecond })
	c := dialRaw(t, f.url)
	c.send(`{"type":"reset"}`)
	if s := c.closed(); s != websocket.StatusPolicyViolation {
		t.Errorf("idle session closed with %v", s)
	}
	waitFor(t, func() bool { return f.closed.Load() == 1 })
}

func TestFrameTooLarge(t *testing.T) {
	f := start(t, func(o *openenv.Options, _ *fixture) { o.MaxFrameBytes = 1024 })
	c := dialRaw(t, f.url)
	big := `{"type":"step","data":{"n":1,"pad":"` + strings.Repeat("x", 4096) + `"}}`
	if err := c.c.Write(t.Context(), websocket.MessageText, []byte(big)); err != nil {
		t.Fatal(err)
	}
	if s := c.closed(); s != websocket.StatusMessageTooBig {
		t.Errorf("oversized frame: closed with %v", s)
	}
	waitFor(t, func() bool { return f.closed.Load() == 1 && f.srv.Active() == 0 })
}

func TestBinaryFrameEndsSession(t *testing.T) {
	f := start(t, nil)
	c := dialRaw(t, f.url)
	if err := c.c.Write(t.Context(), websocket.MessageBinary, []byte(`{"type":"state"}`)); err != nil {
		t.Fatal(err)
	}
	if got := c.read(); !strings.Contains(got, `"code":"SESSION_ERROR"`) {
		t.Errorf("binary frame answered %s", got)
	}
	c.closed()
}

func TestFactoryError(t *testing.T) {
	f := start(t, func(o *openenv.Options, _ *fixture) {
		o.Factory = func(context.Context) (openenv.Env, error) { return nil, errors.New("secret cause at /etc/x") }
	})
	c := dialRaw(t, f.url)
	want := `{"type":"error","data":{"message":"Environment factory 'counter' failed to create instance.","code":"FACTORY_ERROR","factory_name":"counter"}}`
	if got := c.read(); got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	c.closed()
	waitFor(t, func() bool { return f.srv.Active() == 0 })
}

func get(t *testing.T, method, url, body string, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestHTTPRoutes(t *testing.T) {
	f := start(t, nil)
	for _, tc := range []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"GET", "/health", "", 200, `{"status":"healthy"}`},
		{"GET", "/metadata", "", 200, `{"name":"counter","description":"counter environment","readme_content":null,"version":null,"author":null,"documentation_url":null}`},
		{"GET", "/state", "", 200, `{"total":0}`},
		{"POST", "/reset", "", 200, `{"observation":{"total":0},"reward":null,"done":false}`},
		{"POST", "/reset", `{"start": 3, "seed": 1}`, 200, `{"observation":{"total":3},"reward":null,"done":false}`},
		{"POST", "/reset", `{"seed": -1}`, 422, `{"detail":[{"type":"greater_than_equal","loc":["body","seed"],"msg":"Input should be greater than or equal to 0","input":-1,"ctx":{"ge":0}}]}`},
		{"POST", "/step", `{"action": {"n": 4}}`, 200, `{"observation":{"total":4},"reward":4.0,"done":false}`},
		{"POST", "/step", `{"action": {"n": 4, "x": 1}}`, 422, `{"detail":[{"type":"extra_forbidden","loc":["x"],"msg":"Extra inputs are not permitted","input":1}]}`},
		{"POST", "/step", `{}`, 422, `{"detail":[{"type":"missing","loc":["body","action"],"msg":"Field required","input":{}}]}`},
		{"POST", "/step", `{"action": {"n": 13}}`, 500, `{"detail":"unlucky"}`},
		{"POST", "/health", "", 405, `{"detail":"Method Not Allowed"}`},
		{"GET", "/nope", "", 404, `{"detail":"Not Found"}`},
	} {
		code, body := get(t, tc.method, f.url+tc.path, tc.body, nil)
		if code != tc.code || body != tc.want {
			t.Errorf("%s %s %s: %d %s\nwant %d %s", tc.method, tc.path, tc.body, code, body, tc.code, tc.want)
		}
	}
	// Each stateless call made and closed its own environment.
	if f.made.Load() != f.closed.Load() {
		t.Errorf("%d environments made, %d closed", f.made.Load(), f.closed.Load())
	}
	code, body := get(t, "GET", f.url+"/schema", "", nil)
	var s map[string]map[string]any
	if err := json.Unmarshal([]byte(body), &s); code != 200 || err != nil || s["action"]["title"] != "CounterAction" || s["state"]["additionalProperties"] != true {
		t.Errorf("schema: %d %s", code, body)
	}
}

type keys map[string]bool

func (k keys) Check(key string) (string, bool) { return "id", k[key] }

func TestAuth(t *testing.T) {
	f := start(t, func(o *openenv.Options, _ *fixture) { o.Auth = keys{"k1": true} })
	if code, _ := get(t, "GET", f.url+"/health", "", nil); code != 200 {
		t.Errorf("health without a key: %d", code)
	}
	for _, hdr := range []map[string]string{nil, {"Authorization": "Bearer wrong"}, {"X-API-Key": "wrong"}} {
		code, body := get(t, "GET", f.url+"/state", "", hdr)
		if code != 401 || strings.Contains(body, "wrong") {
			t.Errorf("%v: %d %s", hdr, code, body)
		}
	}
	for _, hdr := range []map[string]string{{"Authorization": "Bearer k1"}, {"X-API-Key": "k1"}} {
		if code, body := get(t, "GET", f.url+"/state", "", hdr); code != 200 {
			t.Errorf("%v: %d %s", hdr, code, body)
		}
	}
	if _, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(f.url, "http")+"/ws", nil); err == nil {
		t.Error("a WebSocket without a key was accepted")
	}
	c, err := openenv.NewClient(f.url, openenv.ClientOptions{Header: http.Header{"Authorization": {"Bearer k1"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Reset(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
}

// After Close (or a lost connection) the client opens a new session on its
// next call.
func TestClientReconnects(t *testing.T) {
	f := start(t, nil)
	c, _ := openenv.NewClient(f.url, openenv.ClientOptions{})
	if _, err := c.Reset(t.Context(), map[string]any{"start": 1}); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var st struct{ Total int }
	if err := c.State(t.Context(), &st); err != nil || st.Total != 0 {
		t.Fatalf("state in a new session: %+v %v", st, err)
	}
	if f.made.Load() != 2 {
		t.Errorf("%d sessions made", f.made.Load())
	}
	c.Close()
}

func TestServerCloseEndsSessions(t *testing.T) {
	f := start(t, nil)
	var wg sync.WaitGroup
	for range 2 {
		c := dialRaw(t, f.url)
		c.send(`{"type":"reset"}`)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s := c.closed(); s != websocket.StatusGoingAway {
				t.Errorf("closed with %v", s)
			}
		}()
	}
	f.srv.Close()
	wg.Wait()
	if f.closed.Load() != 2 {
		t.Errorf("%d environments closed", f.closed.Load())
	}
}

// Once a client has seen its session close, the slot is free: the next
// session gets in without retrying.
func TestSlotFreeWhenCloseSeen(t *testing.T) {
	f := start(t, func(o *openenv.Options, _ *fixture) { o.MaxConcurrentEnvs = 1 })
	for i := range 30 {
		c, _ := openenv.NewClient(f.url, openenv.ClientOptions{})
		if _, err := c.Reset(t.Context(), nil); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A full server that just closes new sessions normally (as OpenEnv's
// docker-mode server does) is waited out like CAPACITY_REACHED.
func TestClientRetriesCleanClose(t *testing.T) {
	f := start(t, nil)
	var refused atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refused.Add(1) <= 3 {
			c, err := websocket.Accept(w, r, nil)
			if err == nil {
				c.Close(websocket.StatusNormalClosure, "")
			}
			return
		}
		f.srv.ServeHTTP(w, r)
	}))
	defer hs.Close()
	c, _ := openenv.NewClient(hs.URL, openenv.ClientOptions{CapacityWait: 30 * time.Second, CapacityBackoff: [2]time.Duration{time.Millisecond, 5 * time.Millisecond}})
	defer c.Close()
	if _, err := c.Reset(t.Context(), map[string]any{"start": 1}); err != nil {
		t.Fatal(err)
	}
	if n := refused.Load(); n != 4 {
		t.Errorf("%d connections, want 3 refused and 1 served", n)
	}
	// Without a wait, the first clean close is the answer.
	refused.Store(0)
	c2, _ := openenv.NewClient(hs.URL, openenv.ClientOptions{})
	if _, err := c2.Reset(t.Context(), nil); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Errorf("without CapacityWait: %v", err)
	}
}
