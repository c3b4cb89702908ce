package opensandbox

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/berth-sh/berth/sandbox"
)

// command is one command run through execd: its status, and for a
// background command its combined output.
type command struct {
	id         string
	content    string
	background bool
	startedAt  time.Time
	log        *logBuf // background only

	mu         sync.Mutex
	proc       *sandbox.Process
	running    bool
	exitCode   *int
	errMsg     string
	finishedAt *time.Time
}

func newCommandID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "cmd-" + hex.EncodeToString(b)
}

func (c *command) started(p *sandbox.Process) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.proc, c.running = p, true
}

// finish records the end: code with errMsg "" for exit 0, upstream's
// "exit status N" for other exits, or a failure's message.
func (c *command) finish(code int, errMsg string) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.exitCode, c.errMsg, c.running, c.finishedAt = &code, errMsg, false, &now
	c.proc = nil
}

func (c *command) status() CommandStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CommandStatus{ID: c.id, Content: c.content, Running: c.running, ExitCode: c.exitCode,
		Error: c.errMsg, StartedAt: c.startedAt.UTC(), FinishedAt: c.finishedAt}
}

func (c *command) process() *sandbox.Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proc
}

// table remembers the last max commands of a sandbox; the oldest finished
// one is forgotten first, and a sandbox with max commands running refuses
// more.
type table struct {
	mu    sync.Mutex
	max   int
	byID  map[string]*command
	order []string
}

func newTable(max int) *table { return &table{max: max, byID: map[string]*command{}} }

func (t *table) add(c *command) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.order) >= t.max {
		i := t.oldestFinished()
		if i < 0 {
			return sandbox.Errorf(sandbox.ResourceExhausted, "%d commands are running in this sandbox, the most execd keeps", t.max)
		}
		if old := t.byID[t.order[i]]; old.log != nil {
			old.log.release()
		}
		delete(t.byID, t.order[i])
		t.order = append(t.order[:i], t.order[i+1:]...)
	}
	t.byID[c.id] = c
	t.order = append(t.order, c.id)
	return nil
}

func (t *table) oldestFinished() int {
	for i, id := range t.order {
		c := t.byID[id]
		c.mu.Lock()
		running := c.running || c.exitCode == nil
		c.mu.Unlock()
		if !running {
			return i
		}
	}
	return -1
}

// releaseLogs lets go of every command's output (the Execd closes).
func (t *table) releaseLogs() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.byID {
		if c.log != nil {
			c.log.release()
		}
	}
}

func (t *table) get(id string) *command {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id]
}
