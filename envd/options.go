package envd

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/berth-sh/berth/internal/hostproc"
)

// MaxOOMScoreAdj is the highest oom_score_adj: the OOM killer's first
// choice whatever its size.
const MaxOOMScoreAdj = hostproc.MaxOOMScoreAdj

// Options configure New: what the protocol enforces whatever the backend.
type Options struct {
	// AccessToken, when set, must arrive as X-Access-Token on every call but
	// GET /health; /files also accepts a valid signature instead. "" leaves
	// checking to whoever routes calls here (berth serve).
	AccessToken string
	// MaxMessageBytes bounds one Connect request message; 0 means 8 MiB.
	MaxMessageBytes int64
	// MaxUploadBytes bounds one POST /files body (after decompression); 0
	// means 4 GiB. More is refused with 413.
	MaxUploadBytes int64
	// MaxListEntries bounds one ListDir answer and one WatchDir listing; 0
	// means 100,000.
	MaxListEntries int
	// OnStart, when set, is called once per process started (for metrics).
	OnStart func()
}

const (
	defaultMaxMessageBytes = 8 << 20
	defaultMaxUploadBytes  = 4 << 30
	defaultMaxListEntries  = 100_000
	defaultExitGrace       = 100 * time.Millisecond
)

func (o *Options) fill() error {
	if o.MaxMessageBytes < 0 || o.MaxUploadBytes < 0 || o.MaxListEntries < 0 {
		return fmt.Errorf("envd: server limits must not be negative")
	}
	if o.MaxMessageBytes == 0 {
		o.MaxMessageBytes = defaultMaxMessageBytes
	}
	if o.MaxUploadBytes == 0 {
		o.MaxUploadBytes = defaultMaxUploadBytes
	}
	if o.MaxListEntries == 0 {
		o.MaxListEntries = defaultMaxListEntries
	}
	return nil
}

// ServerOptions configure NewServer, the server over this host. The zero
// value is a usable server that runs processes as its own user, in its own
// environment, with no access token.
type ServerOptions struct {
	// AccessToken: see Options.
	AccessToken string
	// DefaultUser runs processes and owns uploaded files when a call names
	// no user (Authorization: Basic, or ?username= on /files). "" means the
	// server's own user.
	DefaultUser string
	// DefaultDir is the working directory of processes that name none and
	// the base of relative paths, when no user's home applies. "" means "/".
	DefaultDir string
	// Env is the base environment of processes, as KEY=VALUE; nil means the
	// server's own environment.
	Env []string
	// MaxMessageBytes, MaxUploadBytes, MaxListEntries: see Options.
	MaxMessageBytes int64
	MaxUploadBytes  int64
	MaxListEntries  int
	// ExitGrace is how long output is still read after a process exits while
	// a leftover child keeps its stdout or stderr open; 0 means 100 ms.
	ExitGrace time.Duration
	// Blocking, when set, bounds the calls that block an OS thread (file
	// system calls, process starts): each holds one unit of it while in
	// them, and none while waiting on the network. The agent sizes it
	// below its idle threads, so that the Go runtime never needs a new
	// thread for them in a sandbox whose pids are all taken. nil is no
	// bound.
	Blocking *semaphore.Weighted
	// CommandOOMScoreAdj, when above the server's own, is the
	// oom_score_adj of every process it starts and their descendants. A
	// sandbox's agent sets MaxOOMScoreAdj: under the sandbox's memory limit
	// the OOM killer then takes a command, never the agent (the largest
	// process when memory is held by a tmpfs file, and the sandbox with
	// it). 0 leaves the server's score.
	CommandOOMScoreAdj int
}

func (o *ServerOptions) fill() error {
	if o.CommandOOMScoreAdj < 0 || o.CommandOOMScoreAdj > MaxOOMScoreAdj {
		return fmt.Errorf("envd: command oom_score_adj %d is outside 0..%d", o.CommandOOMScoreAdj, MaxOOMScoreAdj)
	}
	if o.ExitGrace < 0 {
		return fmt.Errorf("envd: exit grace must not be negative")
	}
	if o.DefaultDir != "" && !filepath.IsAbs(o.DefaultDir) {
		return fmt.Errorf("envd: default dir %q is not absolute", o.DefaultDir)
	}
	if o.ExitGrace == 0 {
		o.ExitGrace = defaultExitGrace
	}
	if o.Env == nil {
		o.Env = os.Environ()
	}
	return nil
}
