package up

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-sh/berth/internal/httpserve"
	"github.com/berth-sh/berth/sandbox"
)

// Defaults of Options.
const (
	DefaultPort = 8000
	// DefaultReady is how long Start waits for /health: Miles' deadline.
	DefaultReady = 300 * time.Second
	DefaultTTL   = 10 * time.Minute
	// LogPath is where the server's output goes inside the sandbox.
	LogPath = "/tmp/berth-up.log"
	pidPath = "/tmp/berth-up.pid"
)

// Options say what to start where.
type Options struct {
	// Provider creates the sandbox; required.
	Provider *sandbox.Provider
	// Spec is the sandbox's; Port is added to its Ports when missing and
	// TTL defaults to DefaultTTL.
	Spec sandbox.Spec
	// Port is the server's port inside the sandbox; default DefaultPort.
	Port int
	// Command is the server's shell command line; required.
	Command string
	// Env goes to the server's environment only.
	Env map[string]string
	// Stage, when set, runs after create and before the command (uploads).
	Stage func(ctx context.Context, sb *sandbox.Sandbox) error
	// HealthPath is polled until it answers 200; default "/health".
	HealthPath string
	// Ready bounds the wait for health; default DefaultReady.
	Ready time.Duration
	// HTTPClient reaches the endpoint; nil means a client of its own
	// (tests give one that trusts their tunnels' CA).
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// Env is a server running in a sandbox.
type Env struct {
	Sandbox *sandbox.Sandbox

	o    Options
	port sandbox.Port
	hc   *http.Client

	mu       sync.Mutex
	endpoint sandbox.Endpoint
	once     sync.Once
	err      error
}

// Start creates the sandbox, starts the server in it and waits until it is
// healthy. On error nothing is left running.
func Start(ctx context.Context, o Options) (_ *Env, err error) {
	if o.Provider == nil || strings.TrimSpace(o.Command) == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "up: a provider and a command are required")
	}
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	port := sandbox.Port{Number: o.Port, Protocol: sandbox.PortHTTP}
	if err := port.Validate(); err != nil {
		return nil, err
	}
	if o.HealthPath == "" {
		o.HealthPath = "/health"
	}
	if o.Ready <= 0 {
		o.Ready = DefaultReady
	}
	if o.Spec.TTL <= 0 {
		o.Spec.TTL = DefaultTTL
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if !slices.ContainsFunc(o.Spec.Ports, func(p sandbox.Port) bool { return p.Number == o.Port }) {
		o.Spec.Ports = append(append([]sandbox.Port(nil), o.Spec.Ports...), port)
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: httpserve.Transport()}
	}
	sb, err := o.Provider.Create(ctx, o.Spec)
	if err != nil {
		return nil, err
	}
	e := &Env{Sandbox: sb, o: o, port: port, hc: hc}
	defer func() {
		if err != nil {
			_ = e.Close(ctx)
		}
	}()
	if o.Stage != nil {
		if err := o.Stage(ctx, sb); err != nil {
			return nil, fmt.Errorf("up: staging: %w", err)
		}
	}
	if err := e.launch(ctx); err != nil {
		return nil, err
	}
	ep, err := sb.Endpoint(ctx, port)
	if err != nil {
		return nil, err
	}
	e.endpoint = ep
	if err := e.waitHealthy(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// launchScript starts $BERTH_UP_CMD detached, its output in the log, and
// records its pid. setsid puts it out of the exec's session, whose end
// some providers answer by killing the group (Daytona deletes the
// command's session): the server writes its own pid once it is out, and
// the script waits for that before it ends, or a loaded machine could end
// the exec, and kill the group, before the child got to setsid.
const launchScript = `s=; command -v setsid >/dev/null 2>&1 && s=setsid
rm -f ` + pidPath + `
$s sh -c 'echo $$ >` + pidPath + `.new && mv ` + pidPath + `.new ` + pidPath + ` && exec sh -c "$BERTH_UP_CMD"' >` + LogPath + ` 2>&1 </dev/null &
i=0
while [ ! -s ` + pidPath + ` ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
[ -s ` + pidPath + ` ] || { echo "the server did not start within 30 s" >&2; exit 1; }`

func (e *Env) launch(ctx context.Context) error {
	env := map[string]string{}
	for k, v := range e.o.Env {
		env[k] = v
	}
	env["BERTH_UP_CMD"] = e.o.Command
	var out strings.Builder
	res, err := e.Sandbox.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", launchScript}, Env: env, Stdout: &out, Stderr: &out, Timeout: time.Minute})
	if err != nil {
		return fmt.Errorf("up: start the server: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("up: start the server: sh exited %d: %s", res.ExitCode, tail(out.String()))
	}
	return nil
}

// waitHealthy polls the health route, sooner at first, and checks between
// polls that the server still runs.
func (e *Env) waitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, e.o.Ready)
	defer cancel()
	pause := 50 * time.Millisecond
	var last error
	for {
		if last = e.health(ctx); last == nil {
			return nil
		}
		if alive, log := e.alive(ctx); !alive {
			return sandbox.Errorf(sandbox.Unavailable, "up: the server exited before it was healthy; its output: %s", log)
		}
		select {
		case <-ctx.Done():
			return sandbox.Errorf(sandbox.DeadlineExceeded, "up: no healthy answer at %s within %v (last: %v); its output: %s",
				e.o.HealthPath, e.o.Ready, last, e.Log(context.WithoutCancel(ctx)))
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

func (e *Env) health(ctx context.Context) error {
	ep := e.Endpoint()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ep.Join(e.o.HealthPath), nil)
	if err != nil {
		return err
	}
	for k, v := range ep.Headers {
		req.Header.Set(k, v)
	}
	res, err := e.hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", e.o.HealthPath, res.Status)
	}
	return nil
}

// alive says whether the server's process runs, with its log when not.
func (e *Env) alive(ctx context.Context) (bool, string) {
	res, err := e.Sandbox.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", "kill -0 $(cat " + pidPath + ")"}, Timeout: 30 * time.Second})
	if err != nil || res.ExitCode == 0 {
		return true, "" // not known to be dead
	}
	return false, e.Log(ctx)
}

// Log is the tail of the server's output.
func (e *Env) Log(ctx context.Context) string {
	rc, err := e.Sandbox.Open(ctx, LogPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 1<<20))
	return tail(string(b))
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	if s == "" {
		return "(none)"
	}
	return s
}

// Endpoint is the server's current base URL and headers.
func (e *Env) Endpoint() sandbox.Endpoint {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.endpoint
}

// Header is the endpoint's headers, for a client's handshake.
func (e *Env) Header() http.Header {
	h := http.Header{}
	for k, v := range e.Endpoint().Headers {
		h.Set(k, v)
	}
	return h
}

// Port is the server's port inside the sandbox.
func (e *Env) Port() int { return e.port.Number }

// Keep re-arms the sandbox's TTL every TTL/6 and renews an expiring
// endpoint a sixth of its life ahead (renewed is told the new one) until
// ctx ends. Providers that cannot move a deadline keep the one set at
// create.
func (e *Env) Keep(ctx context.Context, renewed func(sandbox.Endpoint)) error {
	ttl := e.o.Spec.TTL
	every := max(ttl/6, time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := e.Sandbox.SetTimeout(ctx, ttl); err != nil && !errors.Is(err, sandbox.ErrNotSupported) {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, sandbox.ErrNotFound) {
				return err // it is gone: nothing to keep
			}
			e.o.Logger.Warn("re-arming the sandbox TTL failed", "sandbox", e.Sandbox.ID(), "error", err)
		}
		ep := e.Endpoint()
		if ep.Expires.IsZero() || time.Until(ep.Expires) > 2*every {
			continue
		}
		next, err := e.Sandbox.Endpoint(ctx, e.port)
		if err != nil {
			e.o.Logger.Warn("renewing the endpoint failed", "sandbox", e.Sandbox.ID(), "error", err)
			continue
		}
		e.mu.Lock()
		e.endpoint = next
		e.mu.Unlock()
		if renewed != nil {
			renewed(next)
		}
	}
}

// Close deletes the sandbox, even after ctx ended. It is idempotent.
func (e *Env) Close(ctx context.Context) error {
	e.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		err := e.Sandbox.Delete(ctx)
		if errors.Is(err, sandbox.ErrNotFound) {
			err = nil
		}
		e.err = errors.Join(err, e.Sandbox.Close())
		e.hc.CloseIdleConnections()
	})
	return e.err
}

// String is the base URL, for messages.
func (e *Env) String() string {
	return e.Endpoint().URL + " (port " + strconv.Itoa(e.port.Number) + ")"
}
