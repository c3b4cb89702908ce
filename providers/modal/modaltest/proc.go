package modaltest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-sh/berth/internal/hostproc"
)

// ioGrace is how long output may keep coming from a command's leftover
// children after it exits before its streams are closed.
const ioGrace = 500 * time.Millisecond

// proc is one exec: a host process, or the file tool run in-process.
type proc struct {
	id             string
	stdout, stderr *output
	stdin          *stdin
	done           chan struct{} // closed once it has exited and its output is complete

	mu     sync.Mutex
	hp     *hostproc.Process // a host process until it has finished; nil otherwise
	code   int32
	signal int32 // non-zero when killed by a signal
}

// execSpec is what TaskExecStart asks for.
type execSpec struct {
	args           []string
	dir            string // sandbox path; "" means the sandbox's workdir
	env            map[string]string
	timeout        time.Duration
	discardStdout  bool
	discardStderr  bool
	stderrToStdout bool
}

// start runs spec in the sandbox and registers it under id. Stdin writes
// wait until the process has its pipe.
func (sb *sandbox) start(id string, spec execSpec) (*proc, error) {
	p := &proc{
		id:     id,
		stdout: newOutput(spec.discardStdout),
		stderr: newOutput(spec.discardStderr),
		stdin:  &stdin{},
		done:   make(chan struct{}),
	}
	if spec.stderrToStdout {
		p.stderr = p.stdout
	}
	p.stdin.mu.Lock()
	defer p.stdin.mu.Unlock()

	sb.mu.Lock()
	if sb.result != nil {
		sb.mu.Unlock()
		return nil, status.Errorf(codes.NotFound, "Sandbox %s has already finished", sb.id)
	}
	if _, dup := sb.execs[id]; dup {
		sb.mu.Unlock()
		return nil, status.Errorf(codes.AlreadyExists, "exec %s already exists", short(id))
	}
	sb.execs[id] = p
	sb.mu.Unlock()

	s := sb.s
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		p.stdin.closed = true
		return nil, status.Error(codes.Unavailable, errClosed.Error())
	}
	s.procs.Add(1)
	s.mu.Unlock()

	if len(spec.args) > 0 && spec.args[0] == fsToolsPath {
		inR, inW, err := os.Pipe()
		if err != nil {
			s.procs.Done()
			p.stdin.closed = true
			return nil, status.Errorf(codes.Internal, "stdin pipe: %v", err)
		}
		p.stdin.w = inW
		go func() {
			defer s.procs.Done()
			defer inR.Close()
			p.finish(runFSTool(sb.root, spec.args[1:], inR, p.stdout, p.stderr), 0)
		}()
		return p, nil
	}
	if err := p.startHost(sb, spec); err != nil {
		s.procs.Done()
		p.stdin.closed = true
		return nil, err
	}
	return p, nil
}

// startHost starts a host process in the sandbox's tree; p.stdin.mu is
// held. A missing program is exit 127 and an unrunnable one 126, as a
// shell reports them.
func (p *proc) startHost(sb *sandbox, spec execSpec) error {
	dir := spec.dir
	if dir == "" {
		dir = sb.def.GetWorkdir()
	}
	if dir == "" {
		dir = "/"
	}
	cwd, err := hostPath(sb.root, dir)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		return status.Errorf(codes.InvalidArgument, "working directory %s does not exist", short(dir))
	}
	hs := hostproc.Spec{
		Args: spec.args, Env: hostproc.Environ(nil, sb.vars, spec.env), Dir: cwd, Stdin: true,
		Stdout: p.stdout, Stderr: p.stderr, Timeout: spec.timeout, Grace: ioGrace,
	}
	look := hostproc.Lookup{PATH: hostproc.Getenv(hs.Env, "PATH"), Dir: cwd, Tree: sb.root}
	if sb.s.opts.Busybox != "" {
		// Inside the chroot the working directory is the sandbox path.
		hs.Dir, hs.Root = path.Clean(dir), sb.root
		look = hostproc.Lookup{PATH: look.PATH, Dir: hs.Dir, Root: sb.root}
	}
	hs.Path, err = hostproc.LookPath(spec.args[0], look)
	var hp *hostproc.Process
	if err == nil {
		hp, err = hostproc.Start(context.Background(), hs)
	}
	if err != nil {
		// Modal's wire has no start error: every refusal is an exit.
		code, ok := hostproc.ShellStatus(err)
		if !ok {
			code = 126
		}
		fmt.Fprint(p.stderr, hostproc.Complaint(spec.args[0], err))
		p.stdin.closed = true
		go func() {
			defer sb.s.procs.Done()
			p.finish(int32(code), 0)
		}()
		return nil
	}
	p.stdin.w = hp.Stdin()
	p.mu.Lock()
	p.hp = hp
	p.mu.Unlock()
	go func() {
		defer sb.s.procs.Done()
		ex := hp.Wait()
		if ex.Signal != 0 {
			p.finish(0, int32(ex.Signal))
		} else {
			p.finish(int32(ex.Code), 0)
		}
	}()
	return nil
}

func (p *proc) finish(code, signal int32) {
	p.mu.Lock()
	p.code, p.signal, p.hp = code, signal, nil
	p.mu.Unlock()
	p.stdout.close()
	p.stderr.close()
	p.stdin.close()
	close(p.done)
}

// kill ends the process group with SIGKILL.
func (p *proc) kill() {
	p.mu.Lock()
	hp := p.hp
	p.mu.Unlock()
	if hp != nil {
		_ = hp.Signal(syscall.SIGKILL)
	}
}

// status is the exit code, or the signal that killed it.
func (p *proc) status() (code, signal int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code, p.signal
}

// hostPath maps an absolute sandbox path into the sandbox's tree. It is for
// working directories only: file calls go through os.Root.
func hostPath(root, p string) (string, error) {
	if !path.IsAbs(p) {
		return "", status.Errorf(codes.InvalidArgument, "path %s is not absolute", short(p))
	}
	return filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(path.Clean(p), "/"))), nil
}

// output holds everything a stream produced, so that a reader can resume at
// any offset.
type output struct {
	mu      sync.Mutex
	buf     []byte
	closed  bool
	discard bool
	changed chan struct{} // closed and replaced on every write and on close
}

func newOutput(discard bool) *output {
	return &output{discard: discard, changed: make(chan struct{})}
}

func (o *output) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.discard {
		o.buf = append(o.buf, b...)
		close(o.changed)
		o.changed = make(chan struct{})
	}
	return len(b), nil
}

func (o *output) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.closed {
		o.closed = true
		close(o.changed)
	}
}

// read returns up to max bytes from offset, waiting for some; eof once the
// stream is closed and offset is at its end.
func (o *output) read(ctx context.Context, offset uint64, max int) ([]byte, bool, error) {
	for {
		o.mu.Lock()
		if offset < uint64(len(o.buf)) {
			end := min(uint64(len(o.buf)), offset+uint64(max))
			b := o.buf[offset:end]
			o.mu.Unlock()
			return b, false, nil
		}
		if o.closed || o.discard {
			o.mu.Unlock()
			return nil, true, nil
		}
		ch := o.changed
		o.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}

// stdin is the write end of an exec's stdin with the byte offsets the
// protocol resumes by.
type stdin struct {
	mu     sync.Mutex
	w      *os.File
	n      uint64
	closed bool
}

var errStdinClosed = errors.New("stdin is closed")

// write appends data at offset (bytes already written are skipped, so a
// resent chunk is harmless) and closes stdin on eof.
func (in *stdin) write(offset uint64, data []byte, eof bool) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		if len(data) == 0 || offset+uint64(len(data)) <= in.n {
			return nil
		}
		return status.Error(codes.FailedPrecondition, errStdinClosed.Error())
	}
	if offset > in.n {
		return status.Errorf(codes.InvalidArgument, "stdin offset %d is past the %d bytes written", offset, in.n)
	}
	if skip := in.n - offset; skip < uint64(len(data)) {
		m, err := in.w.Write(data[skip:])
		in.n += uint64(m)
		if err != nil {
			in.closeLocked()
			return status.Errorf(codes.FailedPrecondition, "the process no longer reads stdin: %v", err)
		}
	}
	if eof {
		in.closeLocked()
	}
	return nil
}

func (in *stdin) state() (uint64, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.n, in.closed
}

func (in *stdin) close() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.closeLocked()
}

func (in *stdin) closeLocked() {
	if !in.closed {
		in.closed = true
		_ = in.w.Close()
	}
}

var _ io.Writer = (*output)(nil)
