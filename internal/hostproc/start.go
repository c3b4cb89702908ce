package hostproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// BusyWait bounds how long Start retries an exec refused with ETXTBSY.
// The descriptors that cause it live from a fork to its child's exec,
// normally microseconds; a second covers a loaded machine.
const BusyWait = time.Second

// DefaultGrace is Spec.Grace when it is 0.
const DefaultGrace = 100 * time.Millisecond

// Spec is a process to start.
type Spec struct {
	// Path is the program, as LookPath found it (inside Root when Root is
	// set); Args[0] is the name it sees.
	Path string
	Args []string
	// Env is its whole environment (see Environ); this process's is never
	// inherited.
	Env []string
	// Dir is its working directory: inside Root when Root is set ("" is
	// then "/"), a host path otherwise ("" is this process's).
	Dir string
	// Root, when set, is the tree the process sees as / (see userns.go).
	Root string
	// Busybox is a static busybox outside Root that confines a process
	// without root; unused as root.
	Busybox string
	// Credential, when set, is the user and groups it runs as (root only).
	Credential *syscall.Credential
	// Stdin gives the process a pipe that Process.Stdin writes; without it
	// the process reads /dev/null.
	Stdin bool
	// Stdout and Stderr receive its output as it comes, from one goroutine
	// each; nil discards. A Write that blocks holds the process back, as a
	// full pipe would.
	Stdout, Stderr io.Writer
	// Timeout, when positive, kills the process group after it
	// (Exit.TimedOut).
	Timeout time.Duration
	// Grace is how long output is still read once the process has exited,
	// while something it left running keeps a pipe open; 0 is
	// DefaultGrace.
	Grace time.Duration
	// KillGroupAtExit kills what the process left in its group when it
	// exits: the command is over when its leader is.
	KillGroupAtExit bool
	// OOMScoreAdj, when above this process's own, is the oom_score_adj the
	// process and its descendants have from their first instruction.
	OOMScoreAdj int
}

// Start starts s. ctx bounds only the start (the ETXTBSY retry): the
// process outlives it; kill it with Signal. An exec refused for good is an
// error that ShellStatus reads as 126 or 127; one still refused with
// ETXTBSY after BusyWait is Unavailable.
func Start(ctx context.Context, s Spec) (*Process, error) {
	if len(s.Args) == 0 || s.Path == "" {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "hostproc: no program to start")
	}
	path, args, dir, sys, err := s.confine()
	if err != nil {
		return nil, errdefs.Classify(errdefs.NotSupported, err)
	}
	ends, err := s.pipes()
	if err != nil {
		return nil, errdefs.Classify(errdefs.Unavailable, err)
	}
	attr := &os.ProcAttr{Dir: dir, Env: s.Env, Files: ends.child[:], Sys: sys}
	if attr.Env == nil {
		attr.Env = []string{} // nil would mean this process's environment
	}
	proc, err := startRetrying(ctx, s.OOMScoreAdj, path, args, attr)
	ends.closeChild()
	if err != nil {
		ends.closeOurs()
		return nil, fmt.Errorf("start %s: %w", s.Args[0], err)
	}
	return newProcess(proc, s, ends), nil
}

// onBusy, when set (by tests), is called at each ETXTBSY refusal.
var onBusy func()

// startRetrying starts the program, again while the exec is refused with
// ETXTBSY, for up to BusyWait or until ctx ends. Each try forks with the
// raised score on its own, so no lock is held across the waits.
func startRetrying(ctx context.Context, oomAdj int, path string, args []string, attr *os.ProcAttr) (*os.Process, error) {
	deadline := time.Now().Add(BusyWait)
	wait := 2 * time.Millisecond
	for {
		var proc *os.Process
		err := withOOMScoreAdj(oomAdj, func() (err error) {
			proc, err = os.StartProcess(path, args, attr)
			return err
		})
		if !errors.Is(err, syscall.ETXTBSY) {
			return proc, err
		}
		if onBusy != nil {
			onBusy()
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, errdefs.Errorf(errdefs.Unavailable, "%w: still open for writing after %v", err, BusyWait)
		}
		t := time.NewTimer(min(wait, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w: %w", err, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// ends are the process's pipe ends: the child's three (stdin, stdout,
// stderr) and ours (the stdin writer, when asked for, and the two readers).
type ends struct {
	child          [3]*os.File
	stdin          *os.File
	stdout, stderr *os.File
}

func (s *Spec) pipes() (*ends, error) {
	e := &ends{}
	var err error
	if s.Stdin {
		e.child[0], e.stdin, err = os.Pipe()
	} else {
		e.child[0], err = os.Open(os.DevNull)
	}
	if err == nil {
		e.stdout, e.child[1], err = os.Pipe()
	}
	if err == nil {
		e.stderr, e.child[2], err = os.Pipe()
	}
	if err != nil {
		e.closeChild()
		e.closeOurs()
		return nil, err
	}
	return e, nil
}

// closeChild closes the child's ends in this process: kept open, they
// would keep EOF from ever reaching our readers.
func (e *ends) closeChild() {
	for _, f := range e.child {
		if f != nil {
			_ = f.Close()
		}
	}
}

func (e *ends) closeOurs() {
	for _, f := range []*os.File{e.stdin, e.stdout, e.stderr} {
		if f != nil {
			_ = f.Close()
		}
	}
}
