package modaltest

import (
	"sync"
	"time"

	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ThrottleMessage is the status message of an injected throttle.
const ThrottleMessage = "Too many requests: rate limit exceeded, please retry"

// faults are the failures a test has asked for. Methods are the bare RPC
// names ("SandboxCreateV2").
type faults struct {
	mu        sync.Mutex
	throttles map[string]*throttleFault
	quotas    map[string]*quotaFault
	outages   map[string]int          // calls still to fail UNAVAILABLE, by method
	builds    map[string]BuildFailure // by image reference
	dropAfter int                     // cut exec output streams after this many bytes; 0: never
	drops     int                     // streams cut so far
}

type throttleFault struct {
	n     int
	after time.Duration
}

type quotaFault struct {
	n   int // <0: every call
	msg string
}

// BuildFailure is an image build that fails: its log lines are streamed
// before the FAILURE result with Exception.
type BuildFailure struct {
	Log       []string
	Exception string
}

func newFaults() faults {
	return faults{
		throttles: map[string]*throttleFault{},
		quotas:    map[string]*quotaFault{},
		outages:   map[string]int{},
		builds:    map[string]BuildFailure{},
	}
}

// Throttle makes the next n calls of method fail with RESOURCE_EXHAUSTED
// carrying an RPCRetryPolicy that advises waiting retryAfter, the way Modal
// throttles clients. The SDK honours the hint itself (up to its
// MaxThrottleWait), without counting it as a retry.
func (s *Server) Throttle(method string, n int, retryAfter time.Duration) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.throttles[method] = &throttleFault{n: n, after: retryAfter}
}

// Quota makes the next n calls of method (every call when n < 0) fail with
// RESOURCE_EXHAUSTED and msg, with no retry hint: a used-up quota, which
// waiting does not free. n == 0 clears it.
func (s *Server) Quota(method string, n int, msg string) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	if n == 0 {
		delete(s.faults.quotas, method)
		return
	}
	s.faults.quotas[method] = &quotaFault{n: n, msg: msg}
}

// Unavailable makes the next n calls of method fail with UNAVAILABLE, as
// an unreachable worker does; clients retry it as transient.
func (s *Server) Unavailable(method string, n int) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.outages[method] = n
}

// FailBuild makes builds of the image reference fail (until cleared with a
// zero BuildFailure).
func (s *Server) FailBuild(ref string, f BuildFailure) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	if f.Exception == "" && f.Log == nil {
		delete(s.faults.builds, ref)
		return
	}
	s.faults.builds[ref] = f
}

// DropStreams cuts every exec output stream (TaskExecStdioRead) with
// UNAVAILABLE once it has sent afterBytes bytes (at least one message),
// while the command may still be running; a client must reopen it at the
// offset it has reached. 0 stops dropping.
func (s *Server) DropStreams(afterBytes int) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.dropAfter = afterBytes
}

// Drops is how many output streams DropStreams has cut.
func (s *Server) Drops() int {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	return s.faults.drops
}

func (f *faults) inject(method string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := f.throttles[method]; t != nil && t.n > 0 {
		t.n--
		st, err := status.New(codes.ResourceExhausted, ThrottleMessage).WithDetails(
			pb.RPCRetryPolicy_builder{RetryAfterSecs: float32(t.after.Seconds())}.Build())
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		return st.Err()
	}
	if f.outages[method] > 0 {
		f.outages[method]--
		return status.Error(codes.Unavailable, "worker unreachable (injected)")
	}
	if q := f.quotas[method]; q != nil && q.n != 0 {
		if q.n > 0 {
			q.n--
		}
		return status.Error(codes.ResourceExhausted, q.msg)
	}
	return nil
}

func (f *faults) buildFailure(ref string) (BuildFailure, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.builds[ref]
	return b, ok
}

// dropLimit is the byte budget of one output stream; 0 means no limit.
func (f *faults) dropLimit() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dropAfter
}

func (f *faults) dropped() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drops++
}
