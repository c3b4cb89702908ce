package modaltest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-sh/berth/internal/hostproc"
	"github.com/berth-sh/berth/internal/testing/fakeengine"
)

// ioGrace is how long output may keep coming from a command's leftover
// children after it exits before its streams are closed.
const ioGrace = 500 * time.Millisecond

// proc is one exec: a host process, or the file tool run in-process.
type proc struct {
	id             string
	stdout, stderr *fakeengine.Log
	stdin          *stdin
	done           chan struct{} // closed once it has exited and its output is complete

	mu     sync.Mutex
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

// output is a stream's log and what the command writes it with: a
// discarded stream's log is closed from the start.
func output(discard bool) (*fakeengine.Log, io.Writer) {
	l := fakeengine.NewLog()
	if discard {
		l.Close()
		return l, io.Discard
	}
	return l, l
}

// start runs spec in the sandbox and registers it under id. Stdin writes
// wait until the process has its pipe.
func (sb *sandbox) start(id string, spec execSpec) (*proc, error) {
	p := &proc{id: id, stdin: &stdin{}, done: make(chan struct{})}
	var stdout, stderr io.Writer
	p.stdout, stdout = output(spec.discardStdout)
	p.stderr, stderr = output(spec.discardStderr)
	if spec.stderrToStdout {
		p.stderr, stderr = p.stdout, stdout
	}
	p.stdin.mu.Lock()
	defer p.stdin.mu.Unlock()

	sb.mu.Lock()
	if sb.resultOrNil() != nil {
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
			p.finish(runFSTool(sb.eb, spec.args[1:], inR, stdout, stderr), 0)
		}()
		return p, nil
	}
	defer s.procs.Done()
	return p, p.startHost(sb, spec, stdout, stderr)
}

// startHost starts a host process in the sandbox's tree; p.stdin.mu is
// held. A missing program is exit 127 and an unrunnable one 126, as a
// shell reports them.
func (p *proc) startHost(sb *sandbox, spec execSpec, stdout, stderr io.Writer) error {
	ep, err := sb.eb.Exec(context.Background(), fakeengine.Command{
		Args: spec.args, Dir: spec.dir, Env: spec.env, Stdin: true, Stdout: stdout, Stderr: stderr,
		Timeout: spec.timeout, Grace: ioGrace,
		OnExit: func(ex hostproc.Exit) {
			if ex.Signal != 0 {
				p.finish(0, int32(ex.Signal))
			} else {
				p.finish(int32(ex.Code), 0)
			}
		},
	})
	switch {
	case errors.Is(err, fakeengine.ErrWorkDir):
		p.stdin.closed = true
		return status.Errorf(codes.InvalidArgument, "working directory %s does not exist", short(spec.dir))
	case err != nil:
		// Modal's wire has no start error: every refusal is an exit.
		fmt.Fprint(stderr, hostproc.Complaint(spec.args[0], err))
		p.stdin.closed = true
		sb.s.procs.Add(1)
		go func() {
			defer sb.s.procs.Done()
			p.finish(126, 0)
		}()
		return nil
	}
	p.stdin.w = ep.Stdin()
	if p.stdin.w == nil { // refused as a shell would: the engine finishes it
		p.stdin.closed = true
	}
	return nil
}

func (p *proc) finish(code, signal int32) {
	p.mu.Lock()
	p.code, p.signal = code, signal
	p.mu.Unlock()
	p.stdout.Close()
	p.stderr.Close()
	p.stdin.close()
	close(p.done)
}

// status is the exit code, or the signal that killed it.
func (p *proc) status() (code, signal int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code, p.signal
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
