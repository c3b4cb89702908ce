package modaltest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// defaultPath is the PATH of commands whose environment sets none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

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
	pgid   int // process group of a host process; 0 otherwise
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

// start runs spec in the sandbox and registers it under id.
func (sb *sandbox) start(id string, spec execSpec) (*proc, error) {
	p := &proc{
		id:     id,
		stdout: newOutput(spec.discardStdout),
		stderr: newOutput(spec.discardStderr),
		done:   make(chan struct{}),
	}
	if spec.stderrToStdout {
		p.stderr = p.stdout
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "stdin pipe: %v", err)
	}
	p.stdin = &stdin{w: inW}

	sb.mu.Lock()
	if sb.result != nil {
		sb.mu.Unlock()
		closeAll(inR, inW)
		return nil, status.Errorf(codes.NotFound, "Sandbox %s has already finished", sb.id)
	}
	if _, dup := sb.execs[id]; dup {
		sb.mu.Unlock()
		closeAll(inR, inW)
		return nil, status.Errorf(codes.AlreadyExists, "exec %s already exists", short(id))
	}
	sb.execs[id] = p
	sb.mu.Unlock()

	s := sb.s
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		closeAll(inR, inW)
		return nil, status.Error(codes.Unavailable, errClosed.Error())
	}
	s.procs.Add(1)
	s.mu.Unlock()

	if len(spec.args) > 0 && spec.args[0] == fsToolsPath {
		go func() {
			defer s.procs.Done()
			defer inR.Close()
			p.finish(runFSTool(sb.root, spec.args[1:], inR, p.stdout, p.stderr), 0)
		}()
		return p, nil
	}
	if err := p.startHost(sb, spec, inR); err != nil {
		s.procs.Done()
		return nil, err
	}
	return p, nil
}

// startHost starts a host process in the sandbox's tree. A missing program
// is exit 127 and an unrunnable one 126, as a shell reports them.
func (p *proc) startHost(sb *sandbox, spec execSpec, inR *os.File) error {
	dir := spec.dir
	if dir == "" {
		dir = sb.def.GetWorkdir()
	}
	if dir == "" {
		dir = "/"
	}
	cwd, err := hostPath(sb.root, dir)
	if err != nil {
		inR.Close()
		return err
	}
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		inR.Close()
		return status.Errorf(codes.InvalidArgument, "working directory %s does not exist", short(dir))
	}
	env := map[string]string{"PATH": defaultPath}
	maps.Copy(env, sb.vars)
	maps.Copy(env, spec.env)
	chroot := ""
	if sb.s.opts.Busybox != "" {
		chroot = sb.root
	}
	prog, code := lookPath(spec.args[0], sb.root, cwd, env["PATH"], chroot != "")
	if code != 0 {
		inR.Close()
		fmt.Fprintf(p.stderr, "%s: %s\n", spec.args[0], map[int32]string{127: "command not found", 126: "permission denied"}[code])
		go func() {
			defer sb.s.procs.Done()
			p.finish(code, 0)
		}()
		return nil
	}
	cmd := &exec.Cmd{
		Path:        prog,
		Args:        spec.args,
		Dir:         cwd,
		Stdin:       inR,
		Stdout:      p.stdout,
		Stderr:      p.stderr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Chroot: chroot},
		// Output from children left behind may hold the pipes open; the
		// exec ends with its process, not with them.
		WaitDelay: ioGrace,
	}
	if chroot != "" {
		// Inside the chroot the working directory is the sandbox path.
		cmd.Dir = path.Clean(dir)
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	if err := cmd.Start(); err != nil {
		inR.Close()
		fmt.Fprintf(p.stderr, "%s: %v\n", spec.args[0], err)
		go func() {
			defer sb.s.procs.Done()
			p.finish(126, 0)
		}()
		return nil
	}
	inR.Close()
	p.mu.Lock()
	p.pgid = cmd.Process.Pid
	p.mu.Unlock()
	var timer *time.Timer
	if spec.timeout > 0 {
		timer = time.AfterFunc(spec.timeout, p.kill)
	}
	go func() {
		defer sb.s.procs.Done()
		_ = cmd.Wait()
		if timer != nil {
			timer.Stop()
		}
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		switch {
		case ws.Signaled():
			p.finish(0, int32(ws.Signal()))
		default:
			p.finish(int32(ws.ExitStatus()), 0)
		}
	}()
	return nil
}

func (p *proc) finish(code, signal int32) {
	p.mu.Lock()
	p.code, p.signal, p.pgid = code, signal, 0
	p.mu.Unlock()
	p.stdout.close()
	p.stderr.close()
	p.stdin.close()
	close(p.done)
}

// kill ends the process group with SIGKILL.
func (p *proc) kill() {
	p.mu.Lock()
	pgid := p.pgid
	p.mu.Unlock()
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
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

// lookPath finds a program as a shell would, in the command's PATH, and
// returns the path to exec (126 or 127 when there is none). In chroot mode
// every path is a sandbox path, checked under root. Otherwise the image is
// the host: bare names and absolute paths missing from the tree are host
// programs, and a relative path with a slash is relative to cwd.
func lookPath(prog, root, cwd, pathList string, chroot bool) (string, int32) {
	type cand struct{ host, exec string }
	var cands []cand
	inTree := func(p string) cand {
		h, _ := hostPath(root, p)
		return cand{h, p}
	}
	switch {
	case chroot && strings.Contains(prog, "/"):
		rel, _ := filepath.Rel(root, filepath.Join(cwd, prog))
		if strings.HasPrefix(prog, "/") {
			rel = prog
		}
		cands = []cand{inTree("/" + strings.TrimPrefix(filepath.ToSlash(rel), "/"))}
	case strings.HasPrefix(prog, "/"):
		c := inTree(prog)
		cands = []cand{{c.host, c.host}, {prog, prog}}
	case strings.Contains(prog, "/"):
		p := filepath.Join(cwd, prog)
		cands = []cand{{p, p}}
	default:
		for _, d := range filepath.SplitList(pathList) {
			switch {
			case !filepath.IsAbs(d):
			case chroot:
				cands = append(cands, inTree(path.Join(d, prog)))
			default:
				cands = append(cands, cand{filepath.Join(d, prog), filepath.Join(d, prog)})
			}
		}
	}
	code := int32(127)
	for _, c := range cands {
		fi, err := os.Stat(c.host)
		if err != nil || fi.IsDir() {
			continue
		}
		if fi.Mode()&0o111 == 0 {
			code = 126
			continue
		}
		return c.exec, 0
	}
	return "", code
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
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
		in.w.Close()
	}
}

var _ io.Writer = (*output)(nil)
