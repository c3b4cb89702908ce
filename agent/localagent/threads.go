package localagent

import (
	"context"
	"io"
	"runtime"
	"sync"

	"golang.org/x/sync/semaphore"
)

// The agent's OS threads count against the sandbox's pids limit. When a
// fork bomb holds every pid and the Go runtime needs one more thread (a
// goroutine blocked in a system call, its P handed to another thread),
// clone fails and the runtime dies with "fatal error: newosproc", taking
// the sandbox with it. The runtime takes an idle thread before it makes
// one and never ends an idle thread, so the agent makes spareThreads
// threads at start, while pids are free, and bounds what can hold a
// thread at once well below that:
//
//   - maxProcs threads run Go code (GOMAXPROCS);
//   - shortSlots goroutines may be in blocking file system calls or
//     process starts (envd's backend through ServerOptions.Blocking, and
//     tree transfers as the agent's own user), never across a wait on
//     the network;
//   - dedicatedSlots tree transfers as another user, each on a locked
//     thread of its own for its whole length (creds.go);
//   - the os/signal loop and the reaper's loop, one each;
//
// which leaves spareThreads-16 for system calls that return at once
// (socket reads and writes, kill, close) but can be caught mid-call when
// the CPU is contended. A running command holds no thread: envd awaits
// its end through a pidfd in the netpoller, as it reads its output.
const (
	spareThreads   = 24
	maxProcs       = 2
	shortSlots     = 8
	dedicatedSlots = 4
)

// threadBudget is the slots above, shared by envd and the tree routes.
type threadBudget struct {
	short, dedicated *semaphore.Weighted
}

func newThreadBudget() *threadBudget {
	return &threadBudget{short: semaphore.NewWeighted(shortSlots), dedicated: semaphore.NewWeighted(dedicatedSlots)}
}

// limitProcs caps GOMAXPROCS at maxProcs: on a large host the runtime
// would otherwise run Go code on as many threads as it has cores.
func limitProcs() {
	if runtime.GOMAXPROCS(0) > maxProcs {
		runtime.GOMAXPROCS(maxProcs)
	}
}

// reserveThreads makes the runtime start n threads now and leaves them
// idle: n goroutines each lock a thread, and only when all n hold one do
// they unlock and end, handing their threads back to the scheduler.
func reserveThreads(n int) {
	var locked, ended sync.WaitGroup
	release := make(chan struct{})
	locked.Add(n)
	ended.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			defer ended.Done()
			runtime.LockOSThread()
			locked.Done()
			<-release
			runtime.UnlockOSThread()
		}()
	}
	locked.Wait()
	close(release)
	ended.Wait()
}

// slot is one short slot, held by a transfer except while it waits on the
// network (reading the request's body, writing the answer). One goroutine
// uses it.
type slot struct {
	ctx  context.Context
	sem  *semaphore.Weighted
	held bool
}

func (s *slot) take() error {
	if s.held {
		return nil
	}
	if err := s.sem.Acquire(s.ctx, 1); err != nil {
		return err
	}
	s.held = true
	return nil
}

func (s *slot) give() {
	if s.held {
		s.sem.Release(1)
		s.held = false
	}
}

// reader is r, read without the slot; a nil slot (a transfer on a thread
// of its own) leaves r as it is.
func (s *slot) reader(r io.Reader) io.Reader {
	if s == nil {
		return r
	}
	return slotFreeReader{s, r}
}

// writer is w, written without the slot; see reader.
func (s *slot) writer(w io.Writer) io.Writer {
	if s == nil {
		return w
	}
	return slotFreeWriter{s, w}
}

type slotFreeReader struct {
	s *slot
	r io.Reader
}

func (f slotFreeReader) Read(p []byte) (int, error) {
	f.s.give()
	n, err := f.r.Read(p)
	if terr := f.s.take(); terr != nil {
		return 0, terr
	}
	return n, err
}

type slotFreeWriter struct {
	s *slot
	w io.Writer
}

func (f slotFreeWriter) Write(p []byte) (int, error) {
	f.s.give()
	n, err := f.w.Write(p)
	if terr := f.s.take(); terr != nil && err == nil {
		return n, terr
	}
	return n, err
}
