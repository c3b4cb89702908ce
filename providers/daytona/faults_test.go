package daytona_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/syncbuf"

	"github.com/berth-sh/berth/providers/daytona"
	"github.com/berth-sh/berth/providers/daytona/daytonatest"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/errdefs"
	"github.com/berth-sh/berth/sandbox/throttle"
)

var spec = sandbox.Spec{Image: "busybox:1.36", Labels: map[string]string{"berth-test": "1"}}

// requestsTo returns the arrival times of requests with method and path.
func requestsTo(srv *daytonatest.Server, method, path string) []daytonatest.Request {
	var out []daytonatest.Request
	for _, r := range srv.Requests() {
		if r.Method == method && r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// TestRateLimitRetriedAfterAdvisedWait: a 429 on a call other than create
// is retried by the driver, no sooner than Retry-After-<throttler> said.
func TestRateLimitRetriedAfterAdvisedWait(t *testing.T) {
	srv, p, sb := openSandbox(t, daytonatest.Options{})
	ctx := t.Context()
	path := "/api/sandbox/" + sb.ID()
	srv.RateLimit(http.MethodGet, path, 1, "sandbox-lifecycle", 1)
	before := len(requestsTo(srv, http.MethodGet, path))
	again, err := p.Connect(ctx, sb.ID())
	if err != nil {
		t.Fatalf("connect through one 429: %v", err)
	}
	again.Close()
	got := requestsTo(srv, http.MethodGet, path)[before:]
	if len(got) != 2 || got[0].Status != http.StatusTooManyRequests || got[1].Status != http.StatusOK {
		t.Fatalf("requests after the fault: %+v, want a 429 then a 200", got)
	}
	if waited := got[1].At.Sub(got[0].At); waited < time.Second {
		t.Errorf("retried %v after the 429, sooner than the advised 1s", waited)
	} else {
		t.Logf("retried %v after a 429 advising 1s", waited)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRateLimitRetriesAreBounded: a throttle that does not lift ends in
// ResourceExhausted after the configured retries.
func TestRateLimitRetriesAreBounded(t *testing.T) {
	srv := newServer(t, daytonatest.Options{})
	d := openDriver(t, srv, func(o *daytona.Options) { o.RateLimitRetries = 2 })
	srv.Inject(daytonatest.Fault{Method: http.MethodGet, Path: "/api/sandbox", Times: 10, Status: http.StatusTooManyRequests,
		Message: "Rate limit exceeded", Header: map[string]string{"Retry-After-authenticated": "0.01"}})
	_, err := d.List(t.Context(), nil)
	if !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("list under a lasting throttle: %v, want ResourceExhausted", err)
	}
	if n := len(requestsTo(srv, http.MethodGet, "/api/sandbox")); n != 3 {
		t.Errorf("%d attempts, want 3 (one and two retries)", n)
	}
	var ae *daytona.APIError
	if !errors.As(err, &ae) || ae.Throttler != "authenticated" || errdefs.RetryAfterOf(err) != 10*time.Millisecond {
		t.Errorf("error %v does not carry the throttler and its advice", err)
	}
}

// TestCreateRateLimitGoesToTheGate: the driver does not retry a throttled
// create itself; the error carries the advised wait, and the create gate
// waits that long before its retry.
func TestCreateRateLimitGoesToTheGate(t *testing.T) {
	srv := newServer(t, daytonatest.Options{})
	p := sandbox.NewProvider("daytona", openDriver(t, srv, nil))
	srv.RateLimit(http.MethodPost, "/api/sandbox", 1, "sandbox-create", 1)
	_, err := p.Create(t.Context(), spec)
	if !errors.Is(err, errdefs.ErrResourceExhausted) || !errdefs.Retryable(err) || errdefs.RetryAfterOf(err) != time.Second {
		t.Fatalf("throttled create: %v; want a retryable ResourceExhausted advising 1s", err)
	}
	if !strings.Contains(err.Error(), "sandbox-create") {
		t.Errorf("error %q does not name the throttler", err)
	}
	if n := len(requestsTo(srv, http.MethodPost, "/api/sandbox")); n != 1 {
		t.Fatalf("%d create requests, want 1: the driver must leave create retries to the gate", n)
	}

	srv.RateLimit(http.MethodPost, "/api/sandbox", 1, "sandbox-create", 1)
	g := throttle.New(sandbox.Limits{Retries: 2, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
	defer g.Close()
	sb, release, err := g.Create(t.Context(), p, spec)
	if err != nil {
		t.Fatalf("create through the gate: %v", err)
	}
	defer release()
	defer sb.Close()
	creates := requestsTo(srv, http.MethodPost, "/api/sandbox")[1:]
	if len(creates) != 2 || creates[0].Status != http.StatusTooManyRequests {
		t.Fatalf("creates through the gate: %+v", creates)
	}
	if waited := creates[1].At.Sub(creates[0].At); waited < time.Second {
		t.Errorf("the gate retried after %v, sooner than the advised 1s", waited)
	}
	if err := sb.Delete(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestQuotaIsNotRetried: a used-up account quota (Daytona answers it 400)
// keeps Daytona's text naming the quota and is not retried by the gate.
// Its class comes from the status, InvalidArgument: nothing reads the text.
func TestQuotaIsNotRetried(t *testing.T) {
	srv := newServer(t, daytonatest.Options{DiskQuotaGB: 5})
	p := sandbox.NewProvider("daytona", openDriver(t, srv, nil))
	big := spec
	big.Resources.StorageMB = 3 * 1024
	first, err := p.Create(t.Context(), big)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	g := throttle.New(sandbox.Limits{Retries: 5, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
	defer g.Close()
	_, _, err = g.Create(t.Context(), p, big)
	if !errors.Is(err, errdefs.ErrInvalidArgument) || errdefs.Retryable(err) {
		t.Fatalf("create past the disk quota: %v; want an InvalidArgument that is not retryable", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "Total disk limit exceeded") || !strings.Contains(msg, "5GiB") {
		t.Errorf("error %q does not name the quota", msg)
	}
	if n := len(requestsTo(srv, http.MethodPost, "/api/sandbox")); n != 2 {
		t.Errorf("%d create requests, want 2: the quota refusal was retried", n)
	}
	if err := first.Delete(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestBuildFailureReportsTheLogTail: a build that ends in build_failed is
// an error holding the end of the build log, and the sandbox is deleted.
func TestBuildFailureReportsTheLogTail(t *testing.T) {
	srv := newServer(t, daytonatest.Options{})
	p := sandbox.NewProvider("daytona", openDriver(t, srv, nil))
	var log strings.Builder
	for i := range 40 {
		fmt.Fprintf(&log, "#%d step %d of the build\n", i, i)
	}
	log.WriteString("ERROR: failed to solve: nosuch/image:1: not found\n")
	srv.FailBuilds(1, log.String())
	_, err := p.Create(t.Context(), sandbox.Spec{Image: "nosuch/image:1"})
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("create of an image that fails to build: %v, want InvalidArgument", err)
	}
	msg := err.Error()
	for _, want := range []string{"build_failed", "ERROR: failed to solve: nosuch/image:1: not found", "#39 step 39"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not hold %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "#0 step 0") {
		t.Errorf("error holds the whole log, not its tail:\n%s", msg)
	}
	waitNoneLive(t, srv)
}

// waitNoneLive waits until the server holds no sandbox that is not being
// destroyed.
func waitNoneLive(t *testing.T, srv *daytonatest.Server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		for _, id := range srv.Live() {
			if st := srv.State(id); st != "destroying" && st != "" {
				left = append(left, id+" "+st)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandboxes left behind: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDroppedStreamStillYieldsEverything: the log stream breaks off in the
// middle of a command; the driver reads the rest by polling and delivers
// every byte of stdout and stderr and the exit code.
func TestDroppedStreamStillYieldsEverything(t *testing.T) {
	needCommands(t)
	srv, _, sb := openSandbox(t, daytonatest.Options{})
	ctx := t.Context()
	if err := sb.MakeDir(ctx, "/work"); err != nil {
		t.Fatal(err)
	}
	srv.DropStreams(1, 300)
	var stdout, stderr syncbuf.Buffer
	proc, err := sb.Exec(ctx, sandbox.Command{
		Args: []string{"sh", "-c", `i=0; while [ $i -lt 400 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done
while [ ! -e gate ]; do sleep 0.05; done; printf 'no newline at the end'; exit 7`},
		Dir: "/work", Stdout: &stdout, Stderr: &stderr,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The command waits for the gate, so the stream drops while it runs.
	deadline := time.Now().Add(10 * time.Second)
	for srv.Dropped() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the server never dropped the stream")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := sb.WriteFile(ctx, "/work/gate", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, err := proc.Wait(ctx)
	if err != nil || code != 7 {
		t.Fatalf("wait = %d, %v; want 7", code, err)
	}
	var wantOut, wantErr strings.Builder
	for i := range 400 {
		fmt.Fprintf(&wantOut, "out %d\n", i)
		fmt.Fprintf(&wantErr, "err %d\n", i)
	}
	wantOut.WriteString("no newline at the end")
	if got := stdout.String(); got != wantOut.String() {
		t.Errorf("stdout after the drop: %d bytes, want %d; tail %q", len(got), wantOut.Len(), tail(got))
	}
	if got := stderr.String(); got != wantErr.String() {
		t.Errorf("stderr after the drop: %d bytes, want %d; tail %q", len(got), wantErr.Len(), tail(got))
	}
}

func tail(s string) string { return s[max(0, len(s)-40):] }

// TestLostCreateAnswerLeavesNoSandbox: the API made the sandbox but its
// answer was lost (a 502 after the work); the driver finds the sandbox by
// the name it chose and deletes it.
func TestLostCreateAnswerLeavesNoSandbox(t *testing.T) {
	srv := newServer(t, daytonatest.Options{})
	p := sandbox.NewProvider("daytona", openDriver(t, srv, nil))
	srv.Inject(daytonatest.Fault{Method: http.MethodPost, Path: "/api/sandbox", Status: http.StatusBadGateway, Message: "upstream reset", AfterServing: true})
	_, err := p.Create(t.Context(), spec)
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("create whose answer was lost: %v, want Unavailable", err)
	}
	// The driver's own lookup by name shows the sandbox was made: by the
	// time Create returns it may be destroyed already.
	var found, deleted bool
	for _, r := range srv.Requests() {
		byName := strings.HasPrefix(r.Path, "/api/sandbox/berth-") && r.Status == http.StatusOK
		found = found || (r.Method == http.MethodGet && byName)
		deleted = deleted || (r.Method == http.MethodDelete && byName)
	}
	if !found {
		t.Fatal("the fault did not create a sandbox; the test proves nothing")
	}
	if !deleted {
		t.Error("the driver did not delete the sandbox by its name")
	}
	waitNoneLive(t, srv)
}

// TestDeleteStopsWhenRefused: a server that refuses to destroy a running
// sandbox gets a stop first; a second delete is NotFound.
func TestDeleteStopsWhenRefused(t *testing.T) {
	srv := newServer(t, daytonatest.Options{RefuseDeleteStarted: true})
	p := sandbox.NewProvider("daytona", openDriver(t, srv, nil))
	sb, err := p.Create(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if err := sb.Delete(t.Context()); err != nil {
		t.Fatalf("delete of a running sandbox on a server that refuses it: %v", err)
	}
	if len(requestsTo(srv, http.MethodPost, "/api/sandbox/"+sb.ID()+"/stop")) != 1 {
		t.Error("the driver did not stop the sandbox before deleting it")
	}
	if err := sb.Delete(t.Context()); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("second delete: %v, want NotFound", err)
	}
	waitNoneLive(t, srv)
}
