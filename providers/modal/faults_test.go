package modal_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/providers/modal"
	"github.com/berth-sh/berth/providers/modal/modaltest"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/throttle"
)

// advised is the wait the injected throttles ask for.
const advised = 300 * time.Millisecond

// callGaps checks that every call after a throttled one came no sooner than
// the advised wait, from call number from on, and returns how many calls
// there were from there.
func callGaps(t *testing.T, srv *modaltest.Server, method string, from int) int {
	t.Helper()
	calls := srv.Calls(method)[from:]
	for i := 1; i < len(calls); i++ {
		if calls[i-1].Err == nil {
			continue
		}
		if gap := calls[i].Time.Sub(calls[i-1].Time); gap < advised {
			t.Errorf("%s call %d came %v after a throttle that advised %v", method, i, gap, advised)
		}
	}
	return len(calls)
}

// The SDK waits out a throttle itself for as long as the server advises,
// up to Options.MaxThrottleWait, and the create succeeds.
func TestThrottleWaitedOutBySDK(t *testing.T) {
	srv := serve(t)
	srv.Throttle("SandboxCreateV2", 2, advised)
	p := sandbox.NewProvider("modal", openDriver(t, srv, nil))
	defer p.Close()
	ctx := t.Context()
	sb, err := p.Create(ctx, sandbox.Spec{Image: testImage})
	if err != nil {
		t.Fatalf("create through two throttles: %v", err)
	}
	defer sb.Delete(ctx)
	defer sb.Close()
	if n := callGaps(t, srv, "SandboxCreateV2", 0); n != 3 {
		t.Errorf("SandboxCreateV2 called %d times, want 3 (two throttled, one through)", n)
	}
	if got := srv.Calls("SandboxCreateV2")[2].ThrottleAttempt; got != 2 {
		t.Errorf("third call says throttle attempt %d, want 2", got)
	}
}

// With the SDK's own waiting off, a throttle reaches the caller as a
// retryable ResourceExhausted that carries the advised wait, and the create
// gate retries after exactly that wait rather than its own backoff (an hour
// here, so only the advised wait can finish the test).
func TestThrottleRetriedByGateAfterAdvisedWait(t *testing.T) {
	srv := serve(t)
	d := openDriver(t, srv, func(o *modal.Options) { o.MaxThrottleWait = -1 })
	p := sandbox.NewProvider("modal", d)
	defer p.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	srv.Throttle("SandboxCreateV2", 1, advised)
	_, err := p.Create(ctx, sandbox.Spec{Image: testImage})
	switch {
	case !errors.Is(err, sandbox.ErrResourceExhausted) || !sandbox.Retryable(err):
		t.Fatalf("throttled create: %v; want a retryable ResourceExhausted", err)
	case sandbox.RetryAfterOf(err) != advised:
		t.Fatalf("throttled create carries no advised wait of %v: %v", advised, err)
	}

	srv.Throttle("SandboxCreateV2", 2, advised)
	gate := throttle.New(sandbox.Limits{BackoffBase: time.Hour, BackoffMax: time.Hour})
	defer gate.Close()
	before := len(srv.Calls("SandboxCreateV2"))
	sb, release, err := gate.Create(ctx, p, sandbox.Spec{Image: testImage})
	if err != nil {
		t.Fatalf("gate create through two throttles: %v", err)
	}
	defer release()
	defer sb.Delete(ctx)
	defer sb.Close()
	if n := callGaps(t, srv, "SandboxCreateV2", before); n != 3 {
		t.Errorf("gate made %d create calls, want 3", n)
	}
}

// A used-up quota is ResourceExhausted too, but neither the SDK nor the
// gate retries it, and the error names the quota.
func TestQuotaNotRetried(t *testing.T) {
	srv := serve(t)
	const msg = "Sandbox limit reached: the workspace quota of 5 concurrent sandboxes is in use"
	srv.Quota("SandboxCreateV2", -1, msg)
	p := sandbox.NewProvider("modal", openDriver(t, srv, nil))
	defer p.Close()
	gate := throttle.New(sandbox.Limits{BackoffBase: time.Millisecond})
	defer gate.Close()
	_, _, err := gate.Create(t.Context(), p, sandbox.Spec{Image: testImage})
	if !errors.Is(err, sandbox.ErrResourceExhausted) || sandbox.Retryable(err) {
		t.Fatalf("quota: %v; want a ResourceExhausted that is not retryable", err)
	}
	if !strings.Contains(err.Error(), "quota of 5 concurrent sandboxes") {
		t.Errorf("quota error does not name the quota: %v", err)
	}
	if n := len(srv.Calls("SandboxCreateV2")); n != 1 {
		t.Errorf("SandboxCreateV2 called %d times, want 1: a quota is not retried", n)
	}
}

// A failed image build reports the tail of the build log, which says why,
// from Create and from PrepareImage; once the cause is gone the image builds.
func TestBuildFailureReportsLogTail(t *testing.T) {
	srv := serve(t)
	const ref = "python:3.99-slim"
	srv.FailBuild(ref, modaltest.BuildFailure{
		Log: []string{
			"Step 1/1 : FROM python:3.99-slim",
			"ERROR: failed to resolve source metadata for docker.io/library/python:3.99-slim: not found",
		},
		Exception: "Image build failed with exit code 1",
	})
	d := openDriver(t, srv, nil)
	p := sandbox.NewProvider("modal", d)
	defer p.Close()
	ctx := t.Context()
	_, err := p.Create(ctx, sandbox.Spec{Image: ref})
	if !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Fatalf("create on a failing image: %v; want InvalidArgument", err)
	}
	for _, want := range []string{"library/python:3.99-slim: not found", "exit code 1", ref} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("build failure does not report %q: %v", want, err)
		}
	}
	if n := len(srv.Calls("SandboxCreateV2")); n != 0 {
		t.Errorf("a sandbox create was attempted on an image that did not build")
	}
	if err := d.PrepareImage(ctx, sandbox.Spec{Image: ref}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("PrepareImage on a failing image: %v", err)
	}
	srv.FailBuild(ref, modaltest.BuildFailure{})
	if err := d.PrepareImage(ctx, sandbox.Spec{Image: ref}); err != nil {
		t.Errorf("PrepareImage once the build works: %v", err)
	}
}

// When the output stream drops mid-command, the SDK reopens it at the byte
// it reached: the caller still gets every byte, in order, and the exit code.
func TestDroppedStreamKeepsOutput(t *testing.T) {
	srv := serve(t)
	p := sandbox.NewProvider("modal", openDriver(t, srv, nil))
	defer p.Close()
	ctx := t.Context()
	sb, err := p.Create(ctx, sandbox.Spec{Image: testImage})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Delete(ctx)
	defer sb.Close()

	// Every stream is cut after its first message, while the loop is still
	// printing.
	srv.DropStreams(1)
	res, err := sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c",
		`i=1; while [ $i -le 15 ]; do echo out-$i; echo err-$i >&2; sleep 0.02; i=$((i+1)); done; exit 3`}})
	if err != nil {
		t.Fatalf("run with dropped streams: %v", err)
	}
	var wantOut, wantErr strings.Builder
	for i := 1; i <= 15; i++ {
		wantOut.WriteString("out-" + itoa(i) + "\n")
		wantErr.WriteString("err-" + itoa(i) + "\n")
	}
	if string(res.Stdout) != wantOut.String() || string(res.Stderr) != wantErr.String() || res.ExitCode != 3 {
		t.Errorf("got stdout %q, stderr %q, exit %d; want every line of both and exit 3", res.Stdout, res.Stderr, res.ExitCode)
	}
	drops := srv.Drops()
	if drops < 2 {
		t.Fatalf("only %d streams were cut; the fault did not fire", drops)
	}

	// A large output cut every 256 KiB arrives whole.
	srv.DropStreams(256 << 10)
	var n countWriter
	res, err = sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' x"}, Stdout: &n})
	if err != nil || res.ExitCode != 0 || n.n != 3000000 || n.other != 0 {
		t.Errorf("large output with drops: %d bytes (%d not x), exit %d, %v; want 3000000 x", n.n, n.other, res.ExitCode, err)
	}
	if srv.Drops() <= drops {
		t.Error("the large output's streams were not cut")
	}
}

type countWriter struct{ n, other int }

func (c *countWriter) Write(b []byte) (int, error) {
	c.n += len(b)
	for _, x := range b {
		if x != 'x' {
			c.other++
		}
	}
	return len(b), nil
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return string(rune('0'+i/10)) + string(rune('0'+i%10))
}
