package envd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/envd/envdproto"
)

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// startParams is a validated Start request.
type startParams struct {
	cfg     *envdproto.ProcessConfig
	tag     *string
	stdin   bool
	caller  caller
	timeout time.Duration // 0: the process lives until it exits
}

// startProcess forks the process and returns it with a first subscriber
// already attached, so that the Start stream sees every byte of output.
func (s *Server) startProcess(sp startParams) (*proc, *subscriber, error) {
	cfg := sp.cfg
	if s.procs.isClosed() {
		return nil, nil, connect.NewError(connect.CodeUnavailable, errors.New("server is shutting down"))
	}
	if cfg == nil || cfg.Cmd == "" {
		return nil, nil, connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd is required"))
	}
	env := buildEnv(s.opts.Env, sp.caller.acct, cfg.Envs)
	dir := s.home(sp.caller)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		dir = "/" // a home that does not exist, like nobody's /nonexistent
	}
	if cfg.Cwd != nil && *cfg.Cwd != "" {
		d, err := s.resolvePath(*cfg.Cwd, sp.caller)
		if err != nil {
			return nil, nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd: %w", err))
		}
		dir = d
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		// Not NotFound: clients read NotFound from Start as "no such program".
		return nil, nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd %q is not a directory", dir))
	}
	path, err := lookPath(cfg.Cmd, envValue(env, "PATH"), dir)
	if err != nil {
		return nil, nil, rpcError(err)
	}
	cmd := &exec.Cmd{
		Path:        path,
		Args:        append([]string{cfg.Cmd}, cfg.Args...),
		Env:         env,
		Dir:         dir,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if a := sp.caller.acct; needsCredential(a) {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: a.uid, Gid: a.gid, Groups: a.groups}
	}

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
		return nil, nil, rpcError(err)
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, nil, rpcError(err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	var inR, inW *os.File
	if sp.stdin {
		if inR, inW, err = pipe(); err != nil {
			closeAll()
			return nil, nil, rpcError(err)
		}
		cmd.Stdin = inR
	}

	err = cmd.Start()
	if err != nil {
		closeAll()
		err = fmt.Errorf("start %s: %w", cfg.Cmd, err)
		if errors.Is(err, syscall.ENOEXEC) || errors.Is(err, syscall.EACCES) {
			// What a shell reports as 126: found but cannot be executed.
			return nil, nil, connect.NewError(connect.CodePermissionDenied, err)
		}
		return nil, nil, rpcError(err)
	}
	// The child has its ends; ours would keep EOF from ever arriving.
	_ = outW.Close()
	_ = errW.Close()
	if inR != nil {
		_ = inR.Close()
	}

	p := &proc{pid: cmd.Process.Pid, tag: sp.tag, config: *cfg, stdin: inW, done: make(chan struct{})}
	if p.config.Cwd == nil {
		p.config.Cwd = &dir
	}
	sub := newSubscriber()
	p.subs = []*subscriber{sub}
	if !s.procs.add(p) {
		_ = p.kill(syscall.SIGKILL)
	}
	var timer *time.Timer
	if sp.timeout > 0 {
		timer = time.AfterFunc(sp.timeout, func() {
			p.timedOut.Store(true)
			_ = p.kill(syscall.SIGKILL)
		})
	}
	var readers sync.WaitGroup
	readers.Add(2)
	go s.pump(p, outR, false, &readers)
	go s.pump(p, errR, true, &readers)
	go s.await(p, cmd, timer, []*os.File{outR, errR}, &readers)
	return p, sub, nil
}

// readBufs holds the pipe readers' buffers: two per exec would otherwise be
// most of an exec's garbage.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// pump copies one output pipe to the subscribers. Once the process has
// exited, each read gets ExitGrace: a leftover child that holds the pipe open
// but stays quiet does not keep the end event back.
func (s *Server) pump(p *proc, f *os.File, stderr bool, wg *sync.WaitGroup) {
	defer wg.Done()
	defer f.Close()
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	buf := *bp
	for {
		if p.exited.Load() {
			_ = f.SetReadDeadline(time.Now().Add(s.opts.ExitGrace))
		}
		n, err := f.Read(buf)
		if n > 0 {
			chunk := make([]byte, n)
			copy(chunk, buf[:n])
			d := &envdproto.DataEvent{Stdout: chunk}
			if stderr {
				d = &envdproto.DataEvent{Stderr: chunk}
			}
			p.publish(&envdproto.ProcessEvent{Data: d}, false)
		}
		if err != nil {
			return
		}
	}
}

// await collects the exit status, lets the output drain, and hands out the
// end event; then the process leaves the table.
func (s *Server) await(p *proc, cmd *exec.Cmd, timer *time.Timer, outs []*os.File, readers *sync.WaitGroup) {
	var ws syscall.WaitStatus
	st, waitErr := cmd.Process.Wait()
	if waitErr == nil {
		ws, _ = st.Sys().(syscall.WaitStatus)
	}
	if timer != nil {
		timer.Stop()
	}
	p.exited.Store(true)
	deadline := time.Now().Add(s.opts.ExitGrace)
	for _, f := range outs {
		_ = f.SetReadDeadline(deadline)
	}
	readers.Wait()
	p.closeStdin()
	s.procs.remove(p)
	end := endEvent(ws, waitErr, p.timedOut.Load())
	p.publish(&envdproto.ProcessEvent{End: end}, true)
	close(p.done)
	s.procs.wg.Done()
}

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

// closeStdin closes the process's stdin; a write in flight fails.
func (p *proc) closeStdin() {
	p.mu.Lock()
	f := p.stdin
	p.stdin = nil
	p.mu.Unlock()
	if f != nil {
		_ = f.Close()
	}
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
