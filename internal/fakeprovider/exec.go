package fakeprovider

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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/types"
)

// defaultPath is the PATH of commands whose environment sets none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// process is one started command. done closes once it has exited, every
// process of its group is gone and its output has been delivered.
type process struct {
	pid      int
	done     chan struct{}
	dropped  chan struct{} // closed when DropStream cut stdout
	dropOnce sync.Once
	faults   *Injector

	code int
	err  error
}

var _ driver.Process = (*process)(nil)

func (s *sandbox) Exec(ctx context.Context, c types.Command) (driver.Process, error) {
	if s.p.opts.Faults.Get().HangExec {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if len(c.Args) == 0 || c.Args[0] == "" {
		return nil, types.Errorf(types.InvalidArgument, "command has no program")
	}
	root, m, err := s.openRoot()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	cwd, err := workDir(root, filepath.Join(s.dir, "root"), firstSet(c.Dir, m.WorkDir, "/"))
	if err != nil {
		return nil, err
	}
	env := environ(m.Env, c.Env)
	p := &process{done: make(chan struct{}), dropped: make(chan struct{}), faults: s.p.opts.Faults}
	chroot := ""
	if s.p.opts.Busybox != "" {
		chroot = filepath.Join(s.dir, "root")
	}
	prog, ok := lookPath(c.Args[0], cwd, env["PATH"], chroot)
	if !ok {
		// As a shell would: a missing program is exit status 127, not an
		// error of Exec.
		if c.Stderr != nil {
			fmt.Fprintf(c.Stderr, "%s: command not found\n", c.Args[0])
		}
		p.code = 127
		close(p.done)
		if s.p.opts.Faults.Get().DropStream {
			p.drop()
		}
		return p, nil
	}
	if chroot != "" {
		// Inside the chroot the working directory is the sandbox path.
		rel, _ := filepath.Rel(chroot, cwd)
		cwd = "/" + filepath.ToSlash(rel)
	}
	return p, p.start(s.dir, prog, cwd, chroot, s.p.opts.Busybox, env, c, s.p.opts.Faults.Get().DropStream)
}

func firstSet(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// workDir maps the sandbox working directory to a host directory, checking
// through os.Root that it exists and that no symlink leads it outside.
func workDir(root *os.Root, rootPath, dir string) (string, error) {
	name, err := rel(dir)
	if err != nil {
		return "", err
	}
	fi, err := root.Stat(name)
	if err != nil {
		return "", fmt.Errorf("working directory %s: %w", dir, mapErr(err))
	}
	if !fi.IsDir() {
		return "", types.Errorf(types.InvalidArgument, "working directory %s is not a directory", dir)
	}
	return filepath.Join(rootPath, filepath.FromSlash(name)), nil
}

// environ is the Spec's environment, then the Command's, plus a PATH. The
// host's environment is never inherited: it may hold secrets.
func environ(spec, cmd map[string]string) map[string]string {
	env := map[string]string{"PATH": defaultPath}
	maps.Copy(env, spec)
	maps.Copy(env, cmd)
	return env
}

// lookPath finds a program the way a shell does, in the command's own PATH
// rather than this process's. Absolute programs are host paths (the fake's
// image is the host); a relative one with a slash is relative to cwd.
//
// With a chroot, programs are looked up under it and returned as paths
// inside it; cwd is a host path either way.
func lookPath(prog, cwd, pathList, chroot string) (string, bool) {
	inRoot := func(hostPath string) string {
		if chroot == "" {
			return hostPath
		}
		rel, err := filepath.Rel(chroot, hostPath)
		if err != nil || strings.HasPrefix(rel, "..") {
			return ""
		}
		return "/" + filepath.ToSlash(rel)
	}
	if strings.Contains(prog, "/") {
		host := filepath.Join(chroot, prog)
		if !path.IsAbs(prog) {
			host = filepath.Join(cwd, prog)
		}
		p := inRoot(host)
		return p, p != "" && executable(host)
	}
	for _, dir := range filepath.SplitList(pathList) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		if host := filepath.Join(chroot, dir, prog); executable(host) {
			return inRoot(host), true
		}
	}
	return "", false
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

func (p *process) start(dir, prog, cwd, chroot, busybox string, env map[string]string, c types.Command, drop bool) error {
	cmd := &exec.Cmd{
		Path:        prog,
		Args:        c.Args,
		Dir:         cwd,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Chroot: chroot},
	}
	if chroot != "" && !privileged() {
		usernsCommand(cmd, busybox, chroot, cwd, prog, c.Args)
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	// Our own pipes rather than exec's copying goroutines: we decide when
	// output is complete (after the whole group is gone) and can cut it.
	outR, outW, err := os.Pipe()
	if err != nil {
		return types.Classify(types.Unavailable, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(outR, outW)
		return types.Classify(types.Unavailable, err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	var inW *os.File
	if c.Stdin != nil {
		var inR *os.File
		if inR, inW, err = os.Pipe(); err != nil {
			closeAll(outR, outW, errR, errW)
			return types.Classify(types.Unavailable, err)
		}
		cmd.Stdin = inR
		defer inR.Close()
	}
	if err := cmd.Start(); err != nil {
		closeAll(outR, outW, errR, errW, inW)
		return types.Classify(types.InvalidArgument, err)
	}
	closeAll(outW, errW)
	p.pid = cmd.Process.Pid
	register(dir, p)
	if _, err := os.Stat(dir); err != nil {
		// Deleted between our check and register: its killAll missed us.
		p.killGroup(syscall.SIGKILL)
	}

	var copiers sync.WaitGroup
	copiers.Go(func() { p.copyOut(outR, c.Stdout, drop) })
	copiers.Go(func() { copyStream(errR, c.Stderr) })
	if inW != nil {
		// Not waited for: a caller's Stdin that never reaches EOF must not
		// keep Wait from returning. Closing inW after exit ends the copy at
		// its next write.
		go func() {
			_, _ = io.Copy(inW, c.Stdin)
			inW.Close()
		}()
	}
	var timedOut atomic.Bool
	var timer *time.Timer
	if c.Timeout > 0 {
		timer = time.AfterFunc(c.Timeout, func() {
			timedOut.Store(true)
			p.killGroup(syscall.SIGKILL)
		})
	}
	go func() {
		_ = cmd.Wait() // the status is in ProcessState
		if timer != nil {
			timer.Stop()
		}
		// The command is over when its leader is: what it left running in
		// its group goes too, and with it the last holders of the pipes.
		p.killGroup(syscall.SIGKILL)
		copiers.Wait()
		p.code = exitCode(cmd.ProcessState)
		if timedOut.Load() {
			p.code = -1
			p.err = types.Errorf(types.DeadlineExceeded, "command timed out after %v", c.Timeout)
		}
		if drop {
			p.drop()
		}
		unregister(dir, p)
		close(p.done)
	}()
	return nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// copyStream delivers a stream to w (nil discards) and drains the pipe even
// if w fails, so the process never blocks on a full pipe.
func copyStream(r *os.File, w io.Writer) {
	defer r.Close()
	if w == nil {
		w = io.Discard
	}
	if _, err := io.Copy(w, r); err != nil {
		_, _ = io.Copy(io.Discard, r)
	}
}

// copyOut is copyStream for stdout, with DropStream: the first chunk is
// delivered, then the stream is cut and the rest discarded.
func (p *process) copyOut(r *os.File, w io.Writer, drop bool) {
	if !drop {
		copyStream(r, w)
		return
	}
	defer r.Close()
	buf := make([]byte, 32<<10)
	n, err := r.Read(buf)
	if n > 0 && w != nil {
		_, _ = w.Write(buf[:n])
	}
	p.drop()
	if err == nil {
		_, _ = io.Copy(io.Discard, r)
	}
}

func (p *process) drop() { p.dropOnce.Do(func() { close(p.dropped) }) }

func exitCode(st *os.ProcessState) int {
	if st == nil {
		return -1
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	if code := st.ExitCode(); code >= 0 {
		return code
	}
	return -1
}

func (p *process) killGroup(sig syscall.Signal) {
	if p.pid > 0 {
		_ = syscall.Kill(-p.pid, sig)
	}
}

func (p *process) PID() int { return p.pid }

func (p *process) Wait(ctx context.Context) (int, error) {
	if p.faults.Get().HangExec {
		<-ctx.Done()
		return -1, ctx.Err()
	}
	select {
	case <-p.dropped:
		return -1, types.Errorf(types.Unavailable, "output stream of process %d dropped", p.pid)
	default:
	}
	select {
	case <-p.done:
		select {
		case <-p.dropped:
			return -1, types.Errorf(types.Unavailable, "output stream of process %d dropped", p.pid)
		default:
		}
		return p.code, p.err
	case <-p.dropped:
		return -1, types.Errorf(types.Unavailable, "output stream of process %d dropped", p.pid)
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

var signals = map[types.Signal]syscall.Signal{
	"SIGTERM": syscall.SIGTERM, "SIGKILL": syscall.SIGKILL, "SIGINT": syscall.SIGINT,
	"SIGHUP": syscall.SIGHUP, "SIGQUIT": syscall.SIGQUIT, "SIGUSR1": syscall.SIGUSR1,
	"SIGUSR2": syscall.SIGUSR2, "SIGSTOP": syscall.SIGSTOP, "SIGCONT": syscall.SIGCONT,
}

// Signal goes to the command's whole process group: "sh -c" and what it
// started are one command to the caller.
func (p *process) Signal(_ context.Context, sig types.Signal) error {
	s, ok := signals[sig]
	if !ok {
		return types.Errorf(types.InvalidArgument, "unknown signal %q", sig)
	}
	select {
	case <-p.done:
		return types.Errorf(types.NotFound, "process %d has ended", p.pid)
	default:
	}
	if err := syscall.Kill(-p.pid, s); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return types.Errorf(types.NotFound, "process %d has ended", p.pid)
		}
		return types.Classify(types.Unavailable, err)
	}
	return nil
}
