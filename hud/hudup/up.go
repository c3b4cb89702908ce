package hudup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/hud"
	"github.com/berth-sh/berth/internal/tailbuf"
	"github.com/berth-sh/berth/sandbox"
)

// Defaults of Options.
const (
	DefaultPort = 8765
	// DefaultWorkDir is where HUD environment images keep env.py (and
	// their .venv); it is used when the image has it.
	DefaultWorkDir = "/app"
	// DefaultReadyTimeout is HUD's own readiness window.
	DefaultReadyTimeout = 240 * time.Second
	// DefaultTTL is how far ahead the sandbox's deadline is kept: a
	// crashed `berth hud up` leaks it for at most this long.
	DefaultTTL = 10 * time.Minute
	// LabelLauncher marks the sandboxes of `berth hud up`.
	LabelLauncher = "berth-hud-up"
)

// readyInterval is HUD's retry interval for connect + hello.
const readyInterval = 500 * time.Millisecond

// teardownTimeout bounds a Delete that runs after the caller's context
// ended (Ctrl-C).
const teardownTimeout = 2 * time.Minute

// tailBytes is how much of the server's output an error quotes.
const tailBytes = 2 << 10

// DefaultCommand is HUD's start command for an environment image, on port.
func DefaultCommand(port int) string {
	return fmt.Sprintf("hud serve env.py --host 0.0.0.0 --port %d", port)
}

// Options say what to run and how.
type Options struct {
	Provider *sandbox.Provider
	Image    string
	// Command is a shell command line; "" means DefaultCommand(Port).
	Command string
	// Port is the control port the server listens on inside the sandbox.
	Port int
	// WorkDir is the command's directory; "" means DefaultWorkDir when
	// the image has it, else the image's own. A .venv/bin under it goes
	// first in PATH, as HUD's images expect.
	WorkDir   string
	Env       map[string]string
	Network   sandbox.Network
	Resources sandbox.Resources
	// Labels are added to the sandbox's; berth.launcher is LabelLauncher.
	Labels map[string]string
	// TTL is how far ahead the sandbox's deadline is kept (re-armed every
	// TTL/3 where the provider can move it); 0 means DefaultTTL.
	TTL time.Duration
	// ReadyTimeout bounds the wait for hello; 0 means DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// Output receives the server's stdout and stderr; nil discards them.
	Output io.Writer
	Logger *slog.Logger
}

func (o *Options) defaults() error {
	if o.Provider == nil {
		return sandbox.Errorf(sandbox.InvalidArgument, "hudup: no provider")
	}
	if o.Image == "" {
		return sandbox.Errorf(sandbox.InvalidArgument, "hudup: no image")
	}
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	if err := (sandbox.Port{Number: o.Port, Protocol: sandbox.PortTCP}).Validate(); err != nil {
		return err
	}
	if strings.TrimSpace(o.Command) == "" {
		o.Command = DefaultCommand(o.Port)
	}
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if limit := o.Provider.Capabilities().MaxTTL; limit > 0 && o.TTL > limit {
		o.TTL = limit
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.Output == nil {
		o.Output = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Env is a HUD environment running in a sandbox.
type Env struct {
	o        Options
	sb       *sandbox.Sandbox
	ep       sandbox.Endpoint
	manifest *hud.Manifest
	tail     *tailbuf.Buffer

	exited chan struct{} // closed when the server's command ends
	code   int
	werr   error

	deleteOnce sync.Once
	deleteErr  error
}

// Up creates the sandbox, starts the server and waits until its control
// channel answers hello through the port's Endpoint. On any failure the
// sandbox is deleted.
func Up(ctx context.Context, o Options) (_ *Env, err error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	labels := map[string]string{}
	for k, v := range o.Labels {
		labels[k] = v
	}
	labels[trial.LabelLauncher] = LabelLauncher
	port := sandbox.Port{Number: o.Port, Protocol: sandbox.PortTCP}
	sb, err := o.Provider.Create(ctx, sandbox.Spec{
		Image: o.Image, Env: o.Env, Network: o.Network, Resources: o.Resources,
		Labels: labels, TTL: o.TTL, Ports: []sandbox.Port{port},
	})
	if err != nil {
		return nil, err
	}
	e := &Env{o: o, sb: sb, tail: &tailbuf.Buffer{Max: tailBytes}, exited: make(chan struct{})}
	defer func() {
		if err != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
			defer cancel()
			if derr := e.Delete(dctx); derr != nil {
				err = errors.Join(err, derr)
			}
		}
	}()
	if !o.Provider.Capabilities().SetTimeout {
		o.Logger.Warn("the provider cannot move a sandbox's deadline: the environment ends at its TTL", "ttl", o.TTL)
	}
	if err := e.start(ctx); err != nil {
		return nil, err
	}
	if e.ep, err = sb.Endpoint(ctx, port); err != nil {
		return nil, err
	}
	if err := e.ready(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// start runs the command in the background, in the work directory, with
// a .venv's bin first in PATH.
func (e *Env) start(ctx context.Context) error {
	dir := e.o.WorkDir
	if dir == "" {
		if fi, err := e.sb.Stat(ctx, DefaultWorkDir); err == nil && fi.Type == sandbox.FileDir {
			dir = DefaultWorkDir
		}
	}
	script := e.o.Command
	if dir != "" {
		if fi, err := e.sb.Stat(ctx, dir+"/.venv/bin"); err == nil && fi.Type == sandbox.FileDir {
			script = "PATH=\"$PWD/.venv/bin:$PATH\"; export PATH\n" + script
		}
	}
	out := &lockedWriter{w: io.MultiWriter(e.o.Output, e.tail)}
	proc, err := e.sb.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", script}, Dir: dir, Stdout: out, Stderr: out})
	if err != nil {
		return fmt.Errorf("hudup: starting %q: %w", e.o.Command, err)
	}
	go func() {
		// The process ends with the sandbox at the latest.
		e.code, e.werr = proc.Wait(context.WithoutCancel(ctx))
		close(e.exited)
	}()
	return nil
}

// ready connects and says hello every readyInterval until the server
// answers, it exits, or ReadyTimeout passes.
func (e *Env) ready(ctx context.Context) error {
	addr, err := e.ep.Addr()
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, e.o.ReadyTimeout)
	defer cancel()
	go func() {
		select {
		case <-e.exited:
			cancel()
		case <-rctx.Done():
		}
	}()
	c, err := hud.DialReady(rctx, addr, readyInterval)
	if err != nil {
		select {
		case <-e.exited:
			return e.exitError("before answering hello")
		default:
		}
		if ctx.Err() == nil && rctx.Err() == context.DeadlineExceeded {
			return sandbox.Errorf(sandbox.DeadlineExceeded, "hudup: the environment did not answer hello within %v: %v%s", e.o.ReadyTimeout, err, e.outputTail())
		}
		return err
	}
	e.manifest = c.Manifest
	// The readiness session is ours: end it rather than leave it parked.
	_ = c.Bye(rctx)
	return c.Close()
}

// exitError says how the server ended, with its output's tail.
func (e *Env) exitError(when string) error {
	if e.werr != nil {
		return fmt.Errorf("hudup: the server's command failed %s: %w%s", when, e.werr, e.outputTail())
	}
	return sandbox.Errorf(sandbox.Unavailable, "hudup: the server exited with code %d %s%s", e.code, when, e.outputTail())
}

func (e *Env) outputTail() string {
	t := strings.TrimSpace(string(e.tail.Bytes()))
	if t == "" {
		return ""
	}
	return "; its output ends:\n" + t
}

// URL is the tcp:// runtime URL for HUD's client.
func (e *Env) URL() string { return e.ep.URL }

// Endpoint is the control port's endpoint (URL, expiry).
func (e *Env) Endpoint() sandbox.Endpoint { return e.ep }

// SandboxID is the sandbox the environment runs in.
func (e *Env) SandboxID() string { return e.sb.ID() }

// Manifest is the environment's reply to the readiness hello.
func (e *Env) Manifest() *hud.Manifest { return e.manifest }

// Run keeps the sandbox alive until ctx ends (nil) or the server exits
// (an error saying how). It does not delete the sandbox.
func (e *Env) Run(ctx context.Context) error {
	every := e.o.TTL / 3
	t := time.NewTicker(every)
	defer t.Stop()
	rearm := e.o.Provider.Capabilities().SetTimeout
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-e.exited:
			return e.exitError("while serving")
		case <-t.C:
			if !rearm {
				continue
			}
			if err := e.sb.SetTimeout(ctx, e.o.TTL); err != nil && ctx.Err() == nil {
				// The deadline is still TTL/3 away at least: retry next tick.
				e.o.Logger.Warn("re-arming the sandbox's deadline failed", "id", e.sb.ID(), "error", err)
			}
		}
	}
}

// Delete deletes the sandbox and releases the handle; later calls return
// the first one's result.
func (e *Env) Delete(ctx context.Context) error {
	e.deleteOnce.Do(func() {
		e.deleteErr = e.sb.Delete(ctx)
		_ = e.sb.Close()
	})
	return e.deleteErr
}

// lockedWriter serialises the server's two output streams.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
