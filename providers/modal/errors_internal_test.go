package modal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	sdk "github.com/modal-labs/modal-client/go"
	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

func TestClassify(t *testing.T) {
	throttledStatus, _ := status.New(codes.ResourceExhausted, "slow down").WithDetails(pb.RPCRetryPolicy_builder{RetryAfterSecs: 1.5}.Build())
	for _, c := range []struct {
		name      string
		err       error
		class     errdefs.Class
		retryable bool
	}{
		{"sdk not found", sdk.NotFoundError{Exception: "Sandbox gone"}, errdefs.NotFound, false},
		{"fs not found", sdk.SandboxFilesystemNotFoundError{Exception: "x"}, errdefs.NotFound, false},
		{"finished sandbox", sdk.ConflictError{Exception: "already finished"}, errdefs.NotFound, false},
		{"already exists", sdk.AlreadyExistsError{Exception: "x"}, errdefs.AlreadyExists, false},
		{"fs exists", sdk.SandboxFilesystemPathAlreadyExistsError{Exception: "x"}, errdefs.AlreadyExists, false},
		{"invalid", sdk.InvalidError{Exception: "x"}, errdefs.InvalidArgument, false},
		{"is a dir", sdk.SandboxFilesystemIsADirectoryError{Exception: "x"}, errdefs.InvalidArgument, false},
		{"not a dir", sdk.SandboxFilesystemNotADirectoryError{Exception: "x"}, errdefs.InvalidArgument, false},
		{"detached", sdk.ClientClosedError{Exception: "x"}, errdefs.InvalidArgument, false},
		{"capacity", sdk.ResourceExhaustedError{Exception: "Insufficient capacity"}, errdefs.ResourceExhausted, true},
		{"exec timeout", sdk.ExecTimeoutError{Exception: "x"}, errdefs.DeadlineExceeded, false},
		{"sandbox timeout", sdk.SandboxTimeoutError{Exception: "x"}, errdefs.DeadlineExceeded, false},
		{"internal failure", sdk.InternalFailure{Exception: "x"}, errdefs.Unavailable, true},
		{"wrapped sdk error", fmt.Errorf("layer: %w", sdk.NotFoundError{Exception: "x"}), errdefs.NotFound, false},
		{"status not found", status.Error(codes.NotFound, "x"), errdefs.NotFound, false},
		{"status unauthenticated", status.Error(codes.Unauthenticated, "x"), errdefs.Unauthenticated, false},
		{"status permission", status.Error(codes.PermissionDenied, "x"), errdefs.Unauthenticated, false},
		{"status precondition", status.Error(codes.FailedPrecondition, "x"), errdefs.InvalidArgument, false},
		{"status unavailable", status.Error(codes.Unavailable, "x"), errdefs.Unavailable, true},
		// The one RPC mapping of sandbox/errdefs: a server fault that says
		// nothing of recovering is not retried.
		{"status internal", status.Error(codes.Internal, "x"), errdefs.Unknown, false},
		{"status aborted", status.Error(codes.Aborted, "x"), errdefs.Unavailable, true},
		{"status deadline", status.Error(codes.DeadlineExceeded, "x"), errdefs.DeadlineExceeded, false},
		{"status unimplemented", status.Error(codes.Unimplemented, "x"), errdefs.NotSupported, false},
		{"wrapped status", fmt.Errorf("env: %w", status.Error(codes.NotFound, "x")), errdefs.NotFound, false},
		{"throttle", throttledStatus.Err(), errdefs.ResourceExhausted, true},
		{"quota", status.Error(codes.ResourceExhausted, "quota of 3 GPUs"), errdefs.ResourceExhausted, false},
		{"context deadline", context.DeadlineExceeded, errdefs.DeadlineExceeded, false},
		{"unknown", errors.New("boom"), errdefs.Unknown, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := classify(c.err)
			if errdefs.ClassOf(got) != c.class {
				t.Errorf("class %v, want %v (%v)", errdefs.ClassOf(got), c.class, got)
			}
			if !errors.Is(got, c.err) {
				t.Errorf("cause dropped: %v does not wrap %v", got, c.err)
			}
			if errdefs.Retryable(got) != c.retryable {
				t.Errorf("retryable = %v, want %v", errdefs.Retryable(got), c.retryable)
			}
		})
	}
	if errdefs.RetryAfterOf(classify(throttledStatus.Err())) != 1500*time.Millisecond {
		t.Errorf("throttle's advised wait not reported")
	}
	if got := classify(context.Canceled); errdefs.ClassOf(got) != errdefs.Unknown || errdefs.Retryable(got) {
		t.Errorf("a cancellation was classified: %v", got)
	}
}

func TestCheckProcessEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, c := range []struct {
		name            string
		caller, process map[string]string
		ok              bool
	}{
		{"both unset", nil, nil, true},
		{"same url", map[string]string{"MODAL_SERVER_URL": "http://x"}, map[string]string{"MODAL_SERVER_URL": "http://x"}, true},
		{"url only in caller", map[string]string{"MODAL_SERVER_URL": "http://x"}, nil, false},
		{"url only in process", nil, map[string]string{"MODAL_SERVER_URL": "http://x"}, false},
		{"v2 default vs 1", map[string]string{"MODAL_SANDBOX_V2": "1"}, nil, true},
		{"v2 true vs 1", map[string]string{"MODAL_SANDBOX_V2": "true"}, map[string]string{"MODAL_SANDBOX_V2": "1"}, true},
		{"v2 off in caller only", map[string]string{"MODAL_SANDBOX_V2": "0"}, nil, false},
		{"profile differs", map[string]string{"MODAL_PROFILE": "a"}, nil, true},
	} {
		err := checkProcessEnv(env(c.caller), env(c.process))
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok=%v", c.name, err, c.ok)
		}
	}
	if err := checkProcessEnv(nil, env(map[string]string{"MODAL_SERVER_URL": "x"})); err != nil {
		t.Errorf("no caller environment: %v", err)
	}
}

func TestCeilSeconds(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{
		0: time.Second, time.Millisecond: time.Second, time.Second: time.Second,
		1500 * time.Millisecond: 2 * time.Second, time.Hour: time.Hour,
	} {
		if got := ceilSeconds(in); got != want {
			t.Errorf("ceilSeconds(%v) = %v, want %v", in, got, want)
		}
	}
}

func TestBuildLogTail(t *testing.T) {
	l := &buildLog{}
	if l.tail() != "" {
		t.Errorf("empty log has a tail: %q", l.tail())
	}
	for i := range 100 {
		l.add(fmt.Sprintf("line %d\n", i))
	}
	tail := l.tail()
	if want := "line 99"; len(tail) == 0 || tail[len(tail)-len(want):] != want {
		t.Errorf("tail does not end with the last line: %q", tail)
	}
	if n := countLines(tail); n != buildLogLines+1 {
		t.Errorf("tail has %d lines, want the header and %d", n, buildLogLines)
	}
	l.add(string(make([]byte, 3*buildLogBytes)))
	if len(l.text) > buildLogBytes {
		t.Errorf("log kept %d bytes, at most %d", len(l.text), buildLogBytes)
	}
}

func countLines(s string) int {
	n := 0
	for _, line := range strings.Split(s, "\n") {
		if line != "" {
			n++
		}
	}
	return n
}
