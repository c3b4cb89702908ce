package sandbox

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"path"
	"sync"
	"time"

	"github.com/berth-sh/berth/internal/syncbuf"
	"github.com/berth-sh/berth/sandbox/driver"
)

// Sandbox is a handle to one sandbox. Close releases the handle; Delete
// destroys the sandbox. Methods are safe for concurrent use; after Close
// (of the sandbox or its provider) they fail with InvalidArgument.
//
// Every call holds a read lock on the handle and on its provider while the
// driver works, and Close takes the write lock, so Close waits for the
// calls in flight instead of pulling the driver out from under them (as
// go-cloud's blob.Bucket does). Streams a call returns (Open, Download)
// and a started Process are the caller's: Close does not wait for them.
type Sandbox struct {
	p  *Provider
	d  driver.Sandbox
	id string

	mu     sync.RWMutex // read-held by calls in flight; Close takes it
	closed bool
}

func newSandbox(p *Provider, d driver.Sandbox) *Sandbox {
	return &Sandbox{p: p, d: d, id: d.ID()}
}

// ID is the provider's identifier of the sandbox.
func (s *Sandbox) ID() string { return s.id }

// Provider is the registry name of the sandbox's provider.
func (s *Sandbox) Provider() string { return s.p.name }

// begin starts a call: until end is called it holds the read locks that
// make Close wait for it. After Close of the handle or of its provider it
// fails with InvalidArgument.
func (s *Sandbox) begin(op string) (end func(), err error) {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, s.wrap(Errorf(InvalidArgument, "sandbox handle is closed"), op)
	}
	pend, err := s.p.begin(op, s.id)
	if err != nil {
		s.mu.RUnlock()
		return nil, err
	}
	return func() { pend(); s.mu.RUnlock() }, nil
}

func (s *Sandbox) wrap(err error, op string) error { return wrap(err, op, s.p.name, s.id) }

// beginPath is begin for a call on a path, which must be absolute:
// relative paths mean different things on different providers.
func (s *Sandbox) beginPath(op, p string) (end func(), err error) {
	if !path.IsAbs(p) {
		return nil, s.wrap(Errorf(InvalidArgument, "path %q is not absolute", p), op)
	}
	return s.begin(op)
}

// Exec starts cmd and returns its process once it has started.
func (s *Sandbox) Exec(ctx context.Context, cmd Command) (*Process, error) {
	const op = "exec"
	end, err := s.begin(op)
	if err != nil {
		return nil, err
	}
	defer end()
	if len(cmd.Args) == 0 || cmd.Args[0] == "" {
		return nil, s.wrap(Errorf(InvalidArgument, "command has no program"), op)
	}
	if cmd.Timeout < 0 {
		return nil, s.wrap(Errorf(InvalidArgument, "command timeout %v is negative", cmd.Timeout), op)
	}
	d, err := s.d.Exec(ctx, cmd)
	if err != nil {
		return nil, s.wrap(err, op)
	}
	return &Process{s: s, d: d}, nil
}

// Result is the outcome of Run.
type Result struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
}

// Run executes cmd to completion. Output goes to cmd.Stdout / cmd.Stderr when
// set, and is otherwise captured in the Result. A non-zero exit is a Result,
// not an error.
func (s *Sandbox) Run(ctx context.Context, cmd Command) (Result, error) {
	// Locked, and copied out: when ctx ends Wait returns while the process
	// runs on and the driver may still write.
	var stdout, stderr syncbuf.Buffer
	if cmd.Stdout == nil {
		cmd.Stdout = &stdout
	}
	if cmd.Stderr == nil {
		cmd.Stderr = &stderr
	}
	p, err := s.Exec(ctx, cmd)
	if err != nil {
		return Result{}, err
	}
	code, err := p.Wait(ctx)
	return Result{ExitCode: code, Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}, err
}

// WriteFile writes data to the absolute path, creating parents.
func (s *Sandbox) WriteFile(ctx context.Context, p string, data []byte, mode fs.FileMode) error {
	return s.WriteFrom(ctx, p, bytes.NewReader(data), mode)
}

// WriteFrom streams r into the file at the absolute path, creating parents.
func (s *Sandbox) WriteFrom(ctx context.Context, p string, r io.Reader, mode fs.FileMode) error {
	const op = "write file"
	end, err := s.beginPath(op, p)
	if err != nil {
		return err
	}
	defer end()
	if mode == 0 {
		mode = 0o644
	}
	return s.wrap(s.d.WriteFile(ctx, p, r, uint32(mode.Perm())), op)
}

// ReadFile returns the whole file at the absolute path.
func (s *Sandbox) ReadFile(ctx context.Context, p string) ([]byte, error) {
	const op = "read file"
	end, err := s.beginPath(op, p)
	if err != nil {
		return nil, err
	}
	defer end()
	rc, err := s.d.ReadFile(ctx, p)
	if err != nil {
		return nil, s.wrap(err, op)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return b, s.wrap(err, op)
}

// Open streams the file at the absolute path; the caller closes it.
func (s *Sandbox) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	const op = "read file"
	end, err := s.beginPath(op, p)
	if err != nil {
		return nil, err
	}
	defer end()
	rc, err := s.d.ReadFile(ctx, p)
	return rc, s.wrap(err, op)
}

// Stat describes one path.
func (s *Sandbox) Stat(ctx context.Context, p string) (FileInfo, error) {
	const op = "stat"
	end, err := s.beginPath(op, p)
	if err != nil {
		return FileInfo{}, err
	}
	defer end()
	fi, err := s.d.Stat(ctx, p)
	return fi, s.wrap(err, op)
}

// ListDir lists a directory's entries, sorted by name.
func (s *Sandbox) ListDir(ctx context.Context, p string) ([]FileInfo, error) {
	const op = "list dir"
	end, err := s.beginPath(op, p)
	if err != nil {
		return nil, err
	}
	defer end()
	fis, err := s.d.ListDir(ctx, p)
	return fis, s.wrap(err, op)
}

// MakeDir creates a directory and its parents.
func (s *Sandbox) MakeDir(ctx context.Context, p string) error {
	const op = "make dir"
	end, err := s.beginPath(op, p)
	if err != nil {
		return err
	}
	defer end()
	return s.wrap(s.d.MakeDir(ctx, p), op)
}

// Remove deletes a file or a directory tree.
func (s *Sandbox) Remove(ctx context.Context, p string) error {
	const op = "remove"
	end, err := s.beginPath(op, p)
	if err != nil {
		return err
	}
	defer end()
	return s.wrap(s.d.Remove(ctx, p), op)
}

// SetTimeout moves the sandbox's provider-side deadline to now + d. It is
// NotSupported where the provider cannot move a deadline after create
// (Capabilities.SetTimeout).
func (s *Sandbox) SetTimeout(ctx context.Context, d time.Duration) error {
	const op = "set timeout"
	if d <= 0 {
		return s.wrap(Errorf(InvalidArgument, "timeout %v must be positive", d), op)
	}
	end, err := s.begin(op)
	if err != nil {
		return err
	}
	defer end()
	ts, ok := s.d.(driver.TimeoutSetter)
	if !ok {
		return s.wrap(Errorf(NotSupported, "the %s provider cannot change a sandbox's timeout after create", s.p.name), op)
	}
	return s.wrap(ts.SetTimeout(ctx, d), op)
}

// Pause stops the sandbox with its memory kept, where the provider can
// (Capabilities.Pause); elsewhere it is NotSupported.
func (s *Sandbox) Pause(ctx context.Context) error {
	return s.pauser(ctx, "pause", func(p driver.Pauser) error { return p.Pause(ctx) })
}

// Resume starts a paused sandbox again (Capabilities.Pause).
func (s *Sandbox) Resume(ctx context.Context) error {
	return s.pauser(ctx, "resume", func(p driver.Pauser) error { return p.Resume(ctx) })
}

func (s *Sandbox) pauser(_ context.Context, op string, f func(driver.Pauser) error) error {
	end, err := s.begin(op)
	if err != nil {
		return err
	}
	defer end()
	p, ok := s.d.(driver.Pauser)
	if !ok {
		return s.wrap(Errorf(NotSupported, "the %s provider cannot pause sandboxes", s.p.name), op)
	}
	return s.wrap(f(p), op)
}

// Snapshot saves the sandbox's file system as an image and returns its
// reference, where the provider can (Capabilities.Snapshot); elsewhere it
// is NotSupported.
func (s *Sandbox) Snapshot(ctx context.Context) (string, error) {
	const op = "snapshot"
	end, err := s.begin(op)
	if err != nil {
		return "", err
	}
	defer end()
	sn, ok := s.d.(driver.Snapshotter)
	if !ok {
		return "", s.wrap(Errorf(NotSupported, "the %s provider cannot snapshot sandboxes", s.p.name), op)
	}
	img, err := sn.Snapshot(ctx)
	return img, s.wrap(err, op)
}

// Fork makes a new sandbox holding a copy of this one, where the provider
// can (Capabilities.Fork); elsewhere it is NotSupported. The caller owns
// the new sandbox.
func (s *Sandbox) Fork(ctx context.Context) (*Sandbox, error) {
	const op = "fork"
	end, err := s.begin(op)
	if err != nil {
		return nil, err
	}
	defer end()
	f, ok := s.d.(driver.Forker)
	if !ok {
		return nil, s.wrap(Errorf(NotSupported, "the %s provider cannot fork sandboxes", s.p.name), op)
	}
	d, err := f.Fork(ctx)
	if err != nil {
		return nil, s.wrap(err, op)
	}
	s.p.log.Debug("forked sandbox", "provider", s.p.name, "id", s.id, "fork", d.ID())
	return newSandbox(s.p, d), nil
}

// Delete destroys the sandbox. It runs to completion even when ctx is
// cancelled (bounded by a teardown timeout), because a teardown that stops
// half way leaks the sandbox. A second Delete is NotFound.
func (s *Sandbox) Delete(ctx context.Context) error {
	const op = "delete"
	end, err := s.begin(op)
	if err != nil {
		return err
	}
	defer end()
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	start := time.Now()
	err = s.d.Delete(dctx)
	s.p.log.Debug("deleted sandbox", "provider", s.p.name, "id", s.id, "duration", time.Since(start), "error", err)
	return s.wrap(err, op)
}

// Close releases the handle without destroying the sandbox. It waits for
// the handle's calls in flight to return first, and is idempotent.
func (s *Sandbox) Close() error {
	s.mu.Lock() // waits for the read locks of calls in flight
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	return s.wrap(s.d.Close(), "close")
}

// Process is a command started by Exec.
type Process struct {
	s *Sandbox
	d driver.Process
}

// PID identifies the process inside the sandbox.
func (p *Process) PID() int { return p.d.PID() }

// Wait returns the exit code once the process has ended and its output has
// been delivered. A non-zero exit is not an error; a command timeout is a
// DeadlineExceeded error.
func (p *Process) Wait(ctx context.Context) (int, error) {
	code, err := p.d.Wait(ctx)
	return code, p.s.wrap(err, "wait")
}

// Signal sends sig to the process. It is NotSupported where the provider
// cannot signal a command (Capabilities.Signal).
func (p *Process) Signal(ctx context.Context, sig Signal) error {
	const op = "signal"
	end, err := p.s.begin(op)
	if err != nil {
		return err
	}
	defer end()
	sg, ok := p.d.(driver.Signaler)
	if !ok {
		return p.s.wrap(Errorf(NotSupported, "the %s provider cannot signal a running command", p.s.p.name), op)
	}
	return p.s.wrap(sg.Signal(ctx, sig), op)
}
