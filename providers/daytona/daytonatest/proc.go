package daytonatest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
)

// session is a toolbox session: commands that share a shell in Daytona.
// Here each command is its own `sh -c`; what a session adds is that
// deleting it kills everything its commands started.
type session struct {
	id   string
	cmds map[string]*command
}

// command is one command run in a session.
type command struct {
	id, text     string
	suppressEcho bool
	log          *logBuf

	mu      sync.Mutex
	proc    *os.Process
	stdin   *os.File // write end; nil once the command has ended
	readers []*os.File
	killed  bool
}

// logBuf is a command's log as the daemon writes it, with its exit code.
type logBuf struct {
	mu      sync.Mutex
	data    []byte
	exit    *int
	ended   bool // the session went away before the command ended
	changed chan struct{}
}

func newLogBuf() *logBuf { return &logBuf{changed: make(chan struct{})} }

func (l *logBuf) notify() {
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *logBuf) append(b []byte) {
	l.mu.Lock()
	l.data = append(l.data, b...)
	l.notify()
	l.mu.Unlock()
}

func (l *logBuf) finish(code int) {
	l.mu.Lock()
	l.exit = &code
	l.notify()
	l.mu.Unlock()
}

func (l *logBuf) end() {
	l.mu.Lock()
	l.ended = true
	l.notify()
	l.mu.Unlock()
}

// since returns the log after off, the exit code, whether the session
// ended, and a channel closed on the next change.
func (l *logBuf) since(off int) ([]byte, *int, bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.data[min(off, len(l.data)):], l.exit, l.ended, l.changed
}

func (l *logBuf) exitCode() *int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.exit
}

var (
	markOut = []byte{1, 1, 1}
	markErr = []byte{2, 2, 2}
)

// label copies r into log the way the daemon's labelling loop does
// (`while IFS= read -r line || [ -n "$line" ]; do printf '<mark>%s\n'`):
// one marked line per line, NUL bytes lost, a newline added to the last.
func label(r io.Reader, mark []byte, log *logBuf) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			line = bytes.ReplaceAll(bytes.TrimSuffix(line, []byte("\n")), []byte{0}, nil)
			out := make([]byte, 0, len(mark)+len(line)+1)
			out = append(append(append(out, mark...), line...), '\n')
			log.append(out)
		}
		if err != nil {
			return
		}
	}
}

// sandboxEnv is the environment commands in sb see; s.mu is held.
func sandboxEnv(sb *sandbox, extra map[string]string) []string {
	env := map[string]string{
		"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME": "/root", "USER": "root", "HOSTNAME": "daytona-sandbox",
	}
	maps.Copy(env, sb.Env)
	maps.Copy(env, extra)
	var out []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// shell returns `sh` set up to run chrooted into root, in its own process
// group.
func shell(root string, env []string, args ...string) *exec.Cmd {
	return &exec.Cmd{
		Path:        "/bin/sh",
		Args:        append([]string{"sh"}, args...),
		Dir:         "/",
		Env:         env,
		SysProcAttr: &syscall.SysProcAttr{Chroot: root, Setpgid: true},
	}
}

// startCommand runs text in sb; s.mu is held.
func (s *Server) startCommand(sb *sandbox, c *command) error {
	if why := Available(); why != "" {
		return errors.New(why)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		for _, f := range []*os.File{inR, inW, outR, outW} {
			f.Close()
		}
		return err
	}
	cmd := shell(sb.root(), sandboxEnv(sb, nil), "-c", c.text)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	err = cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		for _, f := range []*os.File{inW, outR, errR} {
			f.Close()
		}
		return err
	}
	c.mu.Lock()
	c.proc, c.stdin, c.readers = cmd.Process, inW, []*os.File{outR, errR}
	c.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var lw sync.WaitGroup
		lw.Add(2)
		go func() { defer lw.Done(); label(outR, markOut, c.log) }()
		go func() { defer lw.Done(); label(errR, markErr, c.log) }()
		lw.Wait()
		werr := cmd.Wait()
		outR.Close()
		errR.Close()
		c.mu.Lock()
		killed := c.killed
		if c.stdin != nil {
			c.stdin.Close()
			c.stdin = nil
		}
		c.mu.Unlock()
		if killed {
			return // the session is gone; the daemon never writes an exit code
		}
		c.log.finish(exitStatus(cmd.ProcessState, werr))
	}()
	return nil
}

// exitStatus is the shell's view of how a process ended: its code, or
// 128+n when signal n killed it.
func exitStatus(ps *os.ProcessState, err error) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// kill ends the command's process group and unblocks its log readers.
func (c *command) kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.killed {
		return
	}
	c.killed = true
	if c.proc != nil {
		_ = syscall.Kill(-c.proc.Pid, syscall.SIGKILL)
	}
	for _, r := range c.readers {
		// A process that left the group may still hold the pipes; closing
		// the read ends lets the labellers finish anyway.
		_ = r.SetReadDeadline(deadlinePast)
	}
	c.log.end()
}

// input writes data to the command's stdin, adding a newline as Daytona
// does, and echoes it to the log unless the command asked not to.
func (c *command) input(data string) error {
	if len(data) == 0 || data[len(data)-1] != '\n' {
		data += "\n"
	}
	c.mu.Lock()
	in := c.stdin
	c.mu.Unlock()
	if in == nil {
		return errors.New("command has ended")
	}
	if _, err := in.Write([]byte(data)); err != nil {
		return err
	}
	if !c.suppressEcho {
		c.log.append(append(append([]byte(nil), markOut...), data...))
	}
	return nil
}

// killSessions kills every command of sb and forgets its sessions; s.mu
// is held.
func (s *Server) killSessions(sb *sandbox) {
	for id, sess := range sb.sessions {
		for _, c := range sess.cmds {
			c.kill()
		}
		delete(sb.sessions, id)
	}
}

// signalSessions sends sig to the process group of every command of sb
// (SIGSTOP to pause, SIGCONT to resume); s.mu is held.
func (s *Server) signalSessions(sb *sandbox, sig syscall.Signal) {
	for _, sess := range sb.sessions {
		for _, c := range sess.cmds {
			c.mu.Lock()
			if c.proc != nil && !c.killed {
				_ = syscall.Kill(-c.proc.Pid, sig)
			}
			c.mu.Unlock()
		}
	}
}

// killAll is killSessions taking the lock.
func (s *Server) killAll(sb *sandbox) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killSessions(sb)
}
