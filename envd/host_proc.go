package envd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/envd/envdproto"
	"github.com/berth-sh/berth/sandbox/types"
)

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// hostProcess is a process this host forked, in its own process group.
type hostProcess struct {
	pid   int
	cmd   *exec.Cmd
	stdin *os.File // nil when not requested
	grace time.Duration
	// oomAdj is the child's oom_score_adj (ServerOptions.CommandOOMScoreAdj).
	oomAdj int

	outs    []*os.File     // the read ends of stdout and stderr
	readers sync.WaitGroup // the pumps copying them out
	timer   *time.Timer    // the timeout; nil without one
	stopCtx func() bool    // unregisters the kill at the server's Close

	exited   atomic.Bool // the process itself has exited; output may linger
	timedOut atomic.Bool
}

var _ BackendProcess = (*hostProcess)(nil)

// Start forks the process with its output on pipes that pumps copy to
// spec's writers.
func (h *host) Start(ctx context.Context, spec StartSpec) (BackendProcess, error) {
	cfg := spec.Config
	c, err := h.resolveCaller(spec.User)
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	env := buildEnv(h.opts.Env, c.acct, cfg.Envs)
	dir := h.home(c)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		dir = "/" // a home that does not exist, like nobody's /nonexistent
	}
	if cfg.Cwd != nil && *cfg.Cwd != "" {
		d, err := h.resolvePath(*cfg.Cwd, c)
		if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd: %w", err))
		}
		dir = d
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		// Not NotFound: clients read NotFound from Start as "no such program".
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd %q is not a directory", dir))
	}
	path, err := lookPath(cfg.Cmd, envValue(env, "PATH"), dir)
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{
		Path:        path,
		Args:        append([]string{cfg.Cmd}, cfg.Args...),
		Env:         env,
		Dir:         dir,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if a := c.acct; needsCredential(a) {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: a.uid, Gid: a.gid, Groups: a.groups}
	}
	p := &hostProcess{cmd: cmd, grace: h.opts.ExitGrace, oomAdj: h.opts.CommandOOMScoreAdj}
	if err := p.fork(spec.Stdin); err != nil {
		return nil, err
	}
	p.pid = cmd.Process.Pid
	if cfg.Cwd == nil {
		cfg.Cwd = &dir
	}
	p.stopCtx = context.AfterFunc(ctx, func() { _ = p.kill(syscall.SIGKILL) })
	if spec.Timeout > 0 {
		p.timer = time.AfterFunc(spec.Timeout, func() {
			p.timedOut.Store(true)
			_ = p.kill(syscall.SIGKILL)
		})
	}
	p.readers.Add(2)
	go p.pump(p.outs[0], spec.Stdout)
	go p.pump(p.outs[1], spec.Stderr)
	return p, nil
}

// fork starts p.cmd with pipes for its output and, when asked, its stdin.
func (p *hostProcess) fork(stdin bool) error {
	var files []*os.File // every pipe end, for cleanup on failure
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	outR, outW, err := pipe()
	if err != nil {
		return err
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return err
	}
	p.cmd.Stdout, p.cmd.Stderr = outW, errW
	var inR *os.File
	if stdin {
		if inR, p.stdin, err = pipe(); err != nil {
			closeAll()
			return err
		}
		p.cmd.Stdin = inR
	}
	if err := withOOMScoreAdj(p.oomAdj, p.cmd.Start); err != nil {
		closeAll()
		err = fmt.Errorf("start %s: %w", p.cmd.Args[0], err)
		if errors.Is(err, syscall.ENOEXEC) || errors.Is(err, syscall.EACCES) {
			// What a shell reports as 126: found but cannot be executed.
			return connect.NewError(connect.CodePermissionDenied, err)
		}
		return err
	}
	// The child has its ends; ours would keep EOF from ever arriving.
	_ = outW.Close()
	_ = errW.Close()
	if inR != nil {
		_ = inR.Close()
	}
	p.outs = []*os.File{outR, errR}
	return nil
}

// readBufs holds the pipe readers' buffers: two per exec would otherwise be
// most of an exec's garbage.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// pump copies one output pipe to w. Once the process has exited, each read
// gets ExitGrace: a leftover child that holds the pipe open but stays quiet
// does not keep the end event back.
func (p *hostProcess) pump(f *os.File, w io.Writer) {
	defer p.readers.Done()
	defer f.Close()
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	buf := *bp
	for {
		if p.exited.Load() {
			_ = f.SetReadDeadline(time.Now().Add(p.grace))
		}
		n, err := f.Read(buf)
		if n > 0 {
			_, _ = w.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// Wait collects the exit status and lets the output drain.
func (p *hostProcess) Wait() *envdproto.EndEvent {
	var ws syscall.WaitStatus
	awaitExit(p.pid)
	st, waitErr := p.cmd.Process.Wait()
	if waitErr == nil {
		ws, _ = st.Sys().(syscall.WaitStatus)
	}
	if p.timer != nil {
		p.timer.Stop()
	}
	p.stopCtx()
	p.exited.Store(true)
	deadline := time.Now().Add(p.grace)
	for _, f := range p.outs {
		_ = f.SetReadDeadline(deadline)
	}
	p.readers.Wait()
	return endEvent(ws, waitErr, p.timedOut.Load())
}

func (p *hostProcess) PID() int { return p.pid }

// Signal signals the process group, so that children of a shell die too.
func (p *hostProcess) Signal(_ context.Context, sig types.Signal) error {
	s := syscall.SIGKILL
	if sig == types.SIGTERM {
		s = syscall.SIGTERM
	}
	err := p.kill(s)
	if err == syscall.ESRCH {
		return types.Errorf(types.NotFound, "process %d: %w", p.pid, err)
	}
	return err
}

// kill signals the group, or the process alone once it left the group.
// Once reaped the pid may be reused, so an exited process is not signalled.
func (p *hostProcess) kill(sig syscall.Signal) error {
	if p.exited.Load() {
		return syscall.ESRCH
	}
	err := syscall.Kill(-p.pid, sig)
	if err == syscall.ESRCH {
		// Not a group leader any more (it called setsid): the process alone.
		err = syscall.Kill(p.pid, sig)
	}
	return err
}

// WriteStdin writes with a deadline that ctx's end sets, so that a process
// that does not read cannot hold the call forever.
func (p *hostProcess) WriteStdin(ctx context.Context, data []byte) error {
	stop := context.AfterFunc(ctx, func() { _ = p.stdin.SetWriteDeadline(time.Now()) })
	_, err := p.stdin.Write(data)
	if !stop() {
		_ = p.stdin.SetWriteDeadline(time.Time{})
		return ctx.Err()
	}
	return err
}

func (p *hostProcess) CloseStdin() { _ = p.stdin.Close() }

// timeoutError is EndEvent.error for a process killed at its deadline.
const timeoutError = "process timed out"

func endEvent(ws syscall.WaitStatus, waitErr error, timedOut bool) *envdproto.EndEvent {
	end := &envdproto.EndEvent{}
	switch {
	case waitErr != nil:
		msg := waitErr.Error()
		end.ExitCode, end.Status, end.Error = -1, "unknown", &msg
	case ws.Exited():
		end.ExitCode = int32(ws.ExitStatus())
		end.Exited = true
		end.Status = fmt.Sprintf("exit status %d", ws.ExitStatus())
	case ws.Signaled():
		end.ExitCode = 128 + int32(ws.Signal())
		end.Status = "signal: " + ws.Signal().String()
	}
	if timedOut {
		msg := timeoutError
		end.Error = &msg
	}
	return end
}

// buildEnv layers: the server's environment, the user's HOME/USER/LOGNAME,
// then the request's variables; PATH always has a value.
func buildEnv(base []string, a *account, extra map[string]string) []string {
	env := make([]string, 0, len(base)+len(extra)+4)
	index := make(map[string]int, len(base)+len(extra)+4)
	set := func(k, v string) {
		kv := k + "=" + v
		if i, ok := index[k]; ok {
			env[i] = kv
			return
		}
		index[k] = len(env)
		env = append(env, kv)
	}
	for _, kv := range base {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			set(k, v)
		}
	}
	if a != nil {
		set("HOME", a.home)
		set("USER", a.name)
		set("LOGNAME", a.name)
	}
	for k, v := range extra {
		if k != "" && !strings.ContainsAny(k, "=\x00") && !strings.ContainsRune(v, 0) {
			set(k, v)
		}
	}
	if _, ok := index["PATH"]; !ok {
		set("PATH", defaultPath)
	}
	return env
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// lookPath finds name the way a shell would with the process's own PATH and
// working directory (exec.LookPath would use the server's).
func lookPath(name, pathEnv, dir string) (string, error) {
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	if strings.Contains(name, "/") {
		p := abs(name)
		return p, executable(p)
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		p := abs(filepath.Join(d, name))
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("executable %q not found in PATH: %w", name, fs.ErrNotExist)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not executable: %w", p, fs.ErrPermission)
	}
	return nil
}

// awaitExit returns once process pid has exited, waiting in the netpoller
// on a pidfd of its own: os.Process.Wait blocks an OS thread in waitid(2)
// for the whole life of the process, and a runtime that has to make a
// thread per running command fails when the pids limit is reached (see
// ServerOptions.Blocking). Without pidfds it returns at once and Wait
// blocks as before. The process is not reaped here.
func awaitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	// A pidfd reads ready once its process has exited; Read parks until
	// then, or fails at once when the fd is not in the netpoller.
	_ = rc.Read(func(fd uintptr) bool {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(pfd, 0)
			if err != unix.EINTR {
				// An error gives up: Wait then blocks as before.
				return err != nil || n > 0
			}
		}
	})
}
