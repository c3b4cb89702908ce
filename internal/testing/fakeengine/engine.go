package fakeengine

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/berth-sh/berth/internal/testing/busyroot"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Options configure New.
type Options struct {
	// Dir holds a directory per sandbox, <Dir>/<id>, whose root/ is the
	// sandbox's "/"; "" makes a temporary directory that Close removes.
	Dir string
	// OnExpire, when set, ends a sandbox whose deadline has passed the
	// wire's way (through its own states); it must call End. It runs on a
	// timer's goroutine with no lock of the engine's held, after whatever
	// the goroutine that set the deadline did before (a Value completed
	// after Create wants SetDeadline after it, not Spec.TTL). nil ends the
	// sandbox with Expired.
	OnExpire func(*Sandbox)
}

// Engine is a table of sandboxes. Its methods are safe for concurrent use.
type Engine struct {
	opts   Options
	dir    string
	ownDir bool

	mu        sync.Mutex
	sandboxes map[string]*Sandbox
	seq       uint64
	closed    bool

	wg sync.WaitGroup // the goroutines that wait for processes
}

// New makes an engine on o.Dir, creating the directory.
func New(o Options) (*Engine, error) {
	e := &Engine{opts: o, dir: o.Dir, sandboxes: map[string]*Sandbox{}}
	if e.dir == "" {
		d, err := os.MkdirTemp("", "fakeengine-")
		if err != nil {
			return nil, errdefs.Classify(errdefs.Unavailable, err)
		}
		e.dir, e.ownDir = d, true
	}
	abs, err := filepath.Abs(e.dir)
	if err == nil {
		err = os.MkdirAll(abs, 0o755)
	}
	if err != nil {
		return nil, errdefs.Classify(errdefs.InvalidArgument, err)
	}
	e.dir = abs
	return e, nil
}

// Dir is the directory holding the sandboxes, absolute.
func (e *Engine) Dir() string { return e.dir }

// Spec is a sandbox to create.
type Spec struct {
	// ID is the wire's name for it, in the wire's own form; it names its
	// directory, so it is letters, digits, '-' and '_' (at most 64).
	ID    string
	Image string
	// Labels are what List matches; Env is every command's base
	// environment.
	Labels, Env map[string]string
	// WorkDir, when set, is made at create and is the directory of
	// commands that name none ("/" without it).
	WorkDir string
	// TTL, when positive, is how long the sandbox lives (SetDeadline moves
	// it).
	TTL time.Duration
	// Layout, when set, is laid into the new root. Its Busybox makes the
	// root a userland and confines every command to it.
	Layout *busyroot.Root
	// Seed, when set, is a host tree copied over the layout: a fork's
	// parent, a snapshot.
	Seed string
	// Value is the wire's own record of the sandbox, for lookups from
	// List.
	Value any
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// Create lays out a new sandbox and puts it in the table. A malformed ID
// is InvalidArgument, one in use AlreadyExists.
func (e *Engine) Create(s Spec) (*Sandbox, error) {
	if !idPattern.MatchString(s.ID) {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "malformed sandbox id %q", s.ID)
	}
	sb := newSandbox(e, s)
	if err := os.Mkdir(sb.dir, 0o755); err != nil { // claims the ID's directory
		return nil, errdefs.ClassifyErrno(err)
	}
	if err := sb.lay(s); err != nil {
		_ = os.RemoveAll(sb.dir)
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.sandboxes[s.ID] != nil {
		_ = os.RemoveAll(sb.dir)
		if e.closed {
			return nil, errdefs.Errorf(errdefs.Unavailable, "fakeengine: closed")
		}
		return nil, errdefs.Errorf(errdefs.AlreadyExists, "sandbox %s exists", s.ID)
	}
	e.seq++
	sb.seq = e.seq
	e.sandboxes[s.ID] = sb
	if s.TTL > 0 {
		sb.SetDeadline(sb.Created.Add(s.TTL))
	}
	return sb, nil
}

// lay makes the sandbox's tree.
func (sb *Sandbox) lay(s Spec) error {
	if err := os.Mkdir(sb.root, 0o755); err != nil {
		return errdefs.Classify(errdefs.Unavailable, err)
	}
	if l := s.Layout; l != nil {
		lay := *l
		// Without root the /dev nodes are files the host's devices are
		// bind-mounted over (hostproc's user namespace).
		lay.DeviceFiles = lay.DeviceFiles || (lay.Busybox != "" && os.Geteuid() != 0)
		if err := lay.Lay(sb.root); err != nil {
			return fmt.Errorf("fake sandbox: %w", err) // classed by Lay
		}
	}
	if s.Seed != "" {
		if err := busyroot.Copy(s.Seed, sb.root); err != nil {
			return errdefs.Classify(errdefs.Unavailable, fmt.Errorf("copying the seed tree: %w", err))
		}
	}
	if s.WorkDir != "" {
		if err := sb.Mkdir(s.WorkDir, 0o755, true); err != nil {
			return fmt.Errorf("working directory: %w", err)
		}
	}
	return nil
}

// Lookup returns the sandbox with id, ended or not; nil when there is none.
func (e *Engine) Lookup(id string) *Sandbox {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sandboxes[id]
}

// Get returns the live sandbox with id: NotFound when there is none or it
// has ended, InvalidArgument for an ID that cannot be one.
func (e *Engine) Get(id string) (*Sandbox, error) {
	if !idPattern.MatchString(id) {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "malformed sandbox id %q", id)
	}
	sb := e.Lookup(id)
	if sb == nil {
		return nil, errdefs.Errorf(errdefs.NotFound, "sandbox %s does not exist", id)
	}
	if err := sb.live(); err != nil {
		return nil, err
	}
	return sb, nil
}

// List returns the live sandboxes that carry every label of want, oldest
// first.
func (e *Engine) List(want map[string]string) []*Sandbox {
	var out []*Sandbox
	for _, sb := range e.all() {
		if sb.live() == nil && sb.HasLabels(want) {
			out = append(out, sb)
		}
	}
	slices.SortFunc(out, func(a, b *Sandbox) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

func (e *Engine) all() []*Sandbox {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Collect(maps.Values(e.sandboxes))
}

// Close ends every sandbox (Closed), waits for their processes and
// removes a directory New made.
func (e *Engine) Close() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	for _, sb := range e.all() {
		_ = sb.End(Closed)
	}
	e.wg.Wait()
	if e.ownDir {
		_ = os.RemoveAll(e.dir)
	}
}

// expire runs when a deadline's timer fires; a deadline moved later
// meanwhile is armed again.
func (e *Engine) expire(sb *Sandbox) {
	sb.mu.Lock()
	at, ended := sb.deadline, sb.ended != Running
	sb.mu.Unlock()
	switch {
	case ended || at.IsZero():
	case time.Now().Before(at):
		sb.SetDeadline(at)
	case e.opts.OnExpire != nil:
		e.opts.OnExpire(sb)
	default:
		_ = sb.End(Expired)
	}
}

// RandomHex is n random bytes in hex, for the wires' IDs and tokens.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
