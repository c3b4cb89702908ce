package daytonatest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"sync"
	"syscall"

	"github.com/berth-sh/berth/internal/hostproc"
	"github.com/berth-sh/berth/internal/testing/fakeengine"
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

	mu     sync.Mutex
	ep     *fakeengine.Proc
	stdin  *os.File // write end; nil once the command has ended
	killed bool
}

// logBuf is a command's log as the daemon writes it, with its exit code.
// The log closes once the exit code is known or the session went away.
type logBuf struct {
	*fakeengine.Log
	mu    sync.Mutex
	exit  *int
	ended bool // the session went away before the command ended
}

func newLogBuf() *logBuf { return &logBuf{Log: fakeengine.NewLog()} }

func (l *logBuf) append(b []byte) { _, _ = l.Write(b) }

func (l *logBuf) finish(code int) {
	l.mu.Lock()
	l.exit = &code
	l.mu.Unlock()
	l.Close()
}

func (l *logBuf) end() {
	l.mu.Lock()
	l.ended = true
	l.mu.Unlock()
	l.Close()
}

// since returns the log after off, the exit code, whether the session
// ended, and a channel closed on the next change.
func (l *logBuf) since(off int) ([]byte, *int, bool, <-chan struct{}) {
	data, _, changed := l.Since(off)
	l.mu.Lock()
	defer l.mu.Unlock()
	return data, l.exit, l.ended, changed
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

// labeller writes a stream into log the way the daemon's labelling loop
// does (`while IFS= read -r line || [ -n "$line" ]; do printf '<mark>%s\n'`):
// one marked line per line, NUL bytes lost; flush ends the last line.
type labeller struct {
	mark    []byte
	log     *logBuf
	partial []byte // the line begun and not yet ended
}

func (l *labeller) Write(b []byte) (int, error) {
	n := len(b)
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			l.partial = append(l.partial, b...)
			return n, nil
		}
		l.line(append(l.partial, b[:i]...))
		l.partial, b = l.partial[:0], b[i+1:]
	}
}

func (l *labeller) line(line []byte) {
	line = bytes.ReplaceAll(line, []byte{0}, nil)
	out := make([]byte, 0, len(l.mark)+len(line)+1)
	l.log.append(append(append(append(out, l.mark...), line...), '\n'))
}

// flush writes a last line that had no newline, adding one.
func (l *labeller) flush() {
	if len(l.partial) > 0 {
		l.line(l.partial)
		l.partial = nil
	}
}

// startCommand runs text in sb; s.mu is held.
func (s *Server) startCommand(sb *sandbox, c *command) error {
	if why := Available(); why != "" {
		return errors.New(why)
	}
	out, errs := &labeller{mark: markOut, log: c.log}, &labeller{mark: markErr, log: c.log}
	ep, err := sb.eb.Exec(context.Background(), fakeengine.Command{
		Args: []string{"sh", "-c", c.text}, Stdin: true, Stdout: out, Stderr: errs,
		OnExit: func(ex hostproc.Exit) {
			out.flush()
			errs.flush()
			c.mu.Lock()
			killed := c.killed
			c.stdin = nil
			c.mu.Unlock()
			if !killed { // a session gone: the daemon never writes an exit code
				c.log.finish(ex.Code)
			}
		},
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.ep, c.stdin = ep, ep.Stdin()
	c.mu.Unlock()
	return nil
}

// kill ends the command's process group, what it left running there too,
// and ends its log.
func (c *command) kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.killed {
		return
	}
	c.killed = true
	if c.ep != nil {
		_ = c.ep.SignalGroup(syscall.SIGKILL)
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

// stopLocked ends everything sb runs, its sessions' commands first (whose
// logs then get no exit code); s.mu is held.
func (s *Server) stopLocked(sb *sandbox) {
	s.killSessions(sb)
	sb.eb.Kill()
}
