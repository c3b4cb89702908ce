package fakeengine

import (
	"maps"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/berth-sh/berth/internal/testing/busyroot"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Reason is how a sandbox ended.
type Reason int

const (
	// Running: it has not ended.
	Running Reason = iota
	// Deleted: the wire ended it (delete, terminate, kill).
	Deleted
	// Expired: its deadline passed.
	Expired
	// Closed: its engine was closed.
	Closed
)

func (r Reason) String() string {
	return [...]string{"running", "deleted", "expired", "closed"}[r]
}

// killWait bounds how long ending a sandbox waits for its killed processes
// to be reaped: one that escaped its group could hold pipes forever.
const killWait = 10 * time.Second

// Sandbox is one sandbox of an Engine. Its methods are safe for
// concurrent use.
type Sandbox struct {
	ID      string
	Image   string
	Created time.Time
	// Value is Spec.Value.
	Value any

	e       *Engine
	seq     uint64
	dir     string // <Dir>/<id>; root/ inside it is the sandbox's "/"
	root    string
	busybox string // confines commands when set
	env     map[string]string
	workDir string
	done    chan struct{}

	mu       sync.Mutex
	labels   map[string]string
	deadline time.Time
	timer    *time.Timer
	procs    map[*Proc]struct{}
	ended    Reason
	endedAt  time.Time
}

func newSandbox(e *Engine, s Spec) *Sandbox {
	dir := filepath.Join(e.dir, s.ID)
	sb := &Sandbox{
		ID: s.ID, Image: s.Image, Created: time.Now(), Value: s.Value, e: e, dir: dir, root: filepath.Join(dir, "root"),
		env: maps.Clone(s.Env), workDir: s.WorkDir, done: make(chan struct{}), labels: maps.Clone(s.Labels),
		procs: map[*Proc]struct{}{},
	}
	if s.Layout != nil {
		sb.busybox = s.Layout.Busybox
	}
	return sb
}

// Root is the host directory that is the sandbox's "/".
func (sb *Sandbox) Root() string { return sb.root }

// Env is a copy of the sandbox's base environment.
func (sb *Sandbox) Env() map[string]string { return maps.Clone(sb.env) }

// Labels returns a copy of the labels.
func (sb *Sandbox) Labels() map[string]string {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return maps.Clone(sb.labels)
}

// SetLabels replaces the labels.
func (sb *Sandbox) SetLabels(l map[string]string) {
	sb.mu.Lock()
	sb.labels = maps.Clone(l)
	sb.mu.Unlock()
}

// HasLabels says whether the sandbox carries every label of want.
func (sb *Sandbox) HasLabels(want map[string]string) bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	for k, v := range want {
		if have, ok := sb.labels[k]; !ok || have != v {
			return false
		}
	}
	return true
}

// Deadline is when the sandbox expires; zero without one.
func (sb *Sandbox) Deadline() time.Time {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.deadline
}

// SetDeadline makes the sandbox expire at t (zero: never), replacing the
// deadline it had. An ended sandbox is left alone.
func (sb *Sandbox) SetDeadline(t time.Time) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.ended != Running {
		return
	}
	if sb.timer != nil {
		sb.timer.Stop()
		sb.timer = nil
	}
	sb.deadline = t
	if !t.IsZero() {
		sb.timer = time.AfterFunc(time.Until(t), func() { sb.e.expire(sb) })
	}
}

// Done is closed once the sandbox has ended and is torn down.
func (sb *Sandbox) Done() <-chan struct{} { return sb.done }

// Ended says how and when the sandbox ended; Running while it lives. A
// sandbox past its deadline has Expired, even before its timer has torn
// it down.
func (sb *Sandbox) Ended() (Reason, time.Time) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.endedLocked(time.Now())
}

func (sb *Sandbox) endedLocked(now time.Time) (Reason, time.Time) {
	if sb.ended == Running && !sb.deadline.IsZero() && !now.Before(sb.deadline) {
		return Expired, sb.deadline
	}
	return sb.ended, sb.endedAt
}

// live is nil while the sandbox lives, NotFound once it has ended.
func (sb *Sandbox) live() error {
	why, at := sb.Ended()
	if why == Running {
		return nil
	}
	return errdefs.Errorf(errdefs.NotFound, "sandbox %s has ended (%s at %s)", sb.ID, why, at.Format(time.RFC3339))
}

// End ends the sandbox: its processes are killed (and waited for, up to
// killWait), its tree is removed, and its record stays in the table with
// why (Expired, whatever why says, once its deadline has passed). A
// sandbox that has already ended is NotFound.
func (sb *Sandbox) End(why Reason) error {
	sb.mu.Lock()
	if sb.ended != Running {
		sb.mu.Unlock()
		return sb.live()
	}
	now := time.Now()
	if was, at := sb.endedLocked(now); was == Expired {
		why, now = Expired, at
	}
	sb.ended, sb.endedAt = why, now
	if sb.timer != nil {
		sb.timer.Stop()
	}
	sb.mu.Unlock()
	sb.Kill()
	_ = os.RemoveAll(sb.dir)
	close(sb.done)
	return nil
}

// Kill kills every process the sandbox has started, and every process
// rooted in a confined tree, and waits until they are reaped (up to
// killWait); the sandbox lives on (Daytona's stop).
func (sb *Sandbox) Kill() {
	ps := sb.Signal(syscall.SIGKILL)
	if sb.busybox != "" {
		busyroot.KillRooted(sb.root) // what left its group, too
	}
	timeout := time.NewTimer(killWait)
	defer timeout.Stop()
	for _, p := range ps {
		select {
		case <-p.done:
		case <-timeout.C:
			return
		}
	}
}

// Signal sends sig to the process group of every running command
// (SIGSTOP to pause, SIGCONT to resume) and returns the commands.
func (sb *Sandbox) Signal(sig syscall.Signal) []*Proc {
	sb.mu.Lock()
	ps := make([]*Proc, 0, len(sb.procs))
	for p := range sb.procs {
		ps = append(ps, p)
	}
	sb.mu.Unlock()
	for _, p := range ps {
		_ = p.SignalGroup(sig)
	}
	return ps
}
