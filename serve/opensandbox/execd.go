package opensandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/serve/dataplane"
)

// Options configure New.
type Options struct {
	// HomeDir is the base of relative paths (files and cwd); "" means
	// "/root". A command that names no cwd runs in the sandbox's default
	// working directory.
	HomeDir string
	// MaxUploadBytes bounds one upload body; 0 means 1 GiB. More is 413.
	MaxUploadBytes int64
	// MaxBodyBytes bounds a JSON request body; 0 means 1 MiB.
	MaxBodyBytes int64
	// MaxLogBytes bounds the output kept of one background command: its
	// tail is kept, the rest counted and dropped. 0 means 16 MiB.
	MaxLogBytes int64
	// MaxSandboxLogBytes bounds the output the sandbox's background
	// commands keep together; past it the least recently written go first
	// (retain.go). 0 means 64 MiB.
	MaxSandboxLogBytes int64
	// Budget, when set, bounds the output kept by every Execd that shares
	// it (serve/osbserve: one per API key); nil bounds only this Execd's.
	Budget *LogBudget
	// MaxCommands bounds the commands remembered for status and logs (the
	// oldest finished are forgotten); 0 means 1024.
	MaxCommands int
	// OnExec, when set, is called once per command started (metrics).
	OnExec func()
	// Logger gets one line per failed call; nil discards.
	Logger *slog.Logger
}

func (o *Options) fill() {
	if o.HomeDir == "" {
		o.HomeDir = "/root"
	}
	if o.MaxUploadBytes <= 0 {
		o.MaxUploadBytes = 1 << 30
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 1 << 20
	}
	if o.MaxLogBytes <= 0 {
		o.MaxLogBytes = 16 << 20
	}
	if o.MaxSandboxLogBytes <= 0 {
		o.MaxSandboxLogBytes = 64 << 20
	}
	if o.Budget == nil {
		o.Budget = NewLogBudget(0)
	}
	if o.MaxCommands <= 0 {
		o.MaxCommands = 1024
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Execd is the execd API of one sandbox over the sandbox API. It is an
// http.Handler for paths relative to execd's root ("/ping", "/command").
type Execd struct {
	sb   *sandbox.Sandbox
	opts Options
	mux  *http.ServeMux
	cmds *table
	kept logPool // the sandbox's bound on kept output; under opts.Budget.mu

	life context.Context // ends at Close: waiters and streams stop
	stop context.CancelFunc
	wg   sync.WaitGroup

	shellOnce sync.Once
	shell     string
}

var _ http.Handler = (*Execd)(nil)

// New returns the execd API of sb; the caller keeps ownership of sb.
func New(sb *sandbox.Sandbox, opts Options) *Execd {
	opts.fill()
	e := &Execd{sb: sb, opts: opts, mux: http.NewServeMux(), cmds: newTable(opts.MaxCommands),
		kept: logPool{max: opts.MaxSandboxLogBytes}}
	e.life, e.stop = context.WithCancel(context.Background())
	e.mux.HandleFunc("GET /ping", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	e.mux.HandleFunc("POST /command", e.run)
	e.mux.HandleFunc("DELETE /command", e.interrupt)
	// /command/status/{id} and /command/{id}/logs overlap as patterns.
	e.mux.HandleFunc("GET /command/{a}/{b}", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.PathValue("a") == "status":
			e.status(w, r, r.PathValue("b"))
		case r.PathValue("b") == "logs":
			e.logs(w, r, r.PathValue("a"))
		default:
			WriteError(w, http.StatusNotFound, CodeExecdUnsupported, "GET "+r.URL.Path+" is not served by berth's execd")
		}
	})
	e.mux.HandleFunc("POST /files/upload", e.upload)
	e.mux.HandleFunc("GET /files/download", e.download)
	e.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, http.StatusNotFound, CodeExecdUnsupported, fmt.Sprintf("%s %s is not served by berth's execd", r.Method, r.URL.Path))
	})
	return e
}

func (e *Execd) ServeHTTP(w http.ResponseWriter, r *http.Request) { e.mux.ServeHTTP(w, r) }

// Close ends the streams and waiters of the sandbox's commands (it does not
// kill them: deleting the sandbox does), waits for them, and gives their
// kept output back to the budget.
func (e *Execd) Close() error {
	e.stop()
	e.wg.Wait()
	e.cmds.releaseLogs()
	return nil
}

// Retained is the number of output bytes the sandbox's commands keep now.
func (e *Execd) Retained() int64 {
	e.opts.Budget.mu.Lock()
	defer e.opts.Budget.mu.Unlock()
	return e.kept.used
}

func (e *Execd) newLog() *logBuf { return newLogBuf(e.opts.Budget, &e.kept, e.opts.MaxLogBytes) }

// Start runs argv in the background as a command with an ID (the
// sandbox's entrypoint), with env added.
func (e *Execd) Start(argv []string, env map[string]string) (string, error) {
	c := &command{id: newCommandID(), content: strings.Join(argv, " "), background: true, startedAt: time.Now(),
		log: e.newLog()}
	if err := e.cmds.add(c); err != nil {
		return "", err
	}
	return c.id, e.startBackground(c, sandbox.Command{Args: argv, Env: env})
}

// shellOf is bash where the sandbox has it, as upstream runs commands,
// else sh. Looked up once per sandbox.
func (e *Execd) shellOf(ctx context.Context) string {
	e.shellOnce.Do(func() {
		e.shell = "/bin/sh"
		for _, p := range []string{"/bin/bash", "/usr/bin/bash"} {
			if fi, err := e.sb.Stat(ctx, p); err == nil && fi.Type != sandbox.FileDir {
				e.shell = p
				return
			}
		}
	})
	return e.shell
}

// readJSON decodes a bounded JSON body; false means it has answered.
func (e *Execd) readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, e.opts.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			WriteError(w, http.StatusRequestEntityTooLarge, CodeInvalidRequest, fmt.Sprintf("request body is over the %d-byte limit", e.opts.MaxBodyBytes))
			return false
		}
		WriteError(w, http.StatusBadRequest, CodeInvalidRequest, "reading the request body: "+err.Error())
		return false
	}
	if err := json.Unmarshal(body, v); err != nil {
		WriteError(w, http.StatusBadRequest, CodeInvalidRequest, "error parsing request, MAYBE invalid body format. "+err.Error())
		return false
	}
	return true
}

// commandOf turns a request into the sandbox command (without output).
func (e *Execd) commandOf(ctx context.Context, req RunCommandRequest) (sandbox.Command, error) {
	if strings.TrimSpace(req.Command) == "" {
		return sandbox.Command{}, sandbox.Errorf(sandbox.InvalidArgument, "command is required")
	}
	if req.GID != nil && req.UID == nil {
		return sandbox.Command{}, sandbox.Errorf(sandbox.InvalidArgument, "uid is required when gid is given")
	}
	if req.Timeout < 0 {
		return sandbox.Command{}, sandbox.Errorf(sandbox.InvalidArgument, "timeout %d ms is negative", req.Timeout)
	}
	cmd := sandbox.Command{Args: []string{e.shellOf(ctx), "-c", req.Command}, Env: req.Envs,
		Timeout: time.Duration(req.Timeout) * time.Millisecond}
	if req.Cwd != "" {
		dir, err := dataplane.ResolvePath(expandHome(req.Cwd, e.opts.HomeDir), e.opts.HomeDir)
		if err != nil {
			return cmd, err
		}
		cmd.Dir = dir
	}
	if req.UID != nil {
		cmd.User = strconv.FormatUint(uint64(*req.UID), 10)
		if req.GID != nil {
			cmd.User += ":" + strconv.FormatUint(uint64(*req.GID), 10)
		}
	}
	return cmd, nil
}

// expandHome resolves a leading "~", as upstream's execd does.
func expandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return home + "/" + rest
	}
	return p
}

func (e *Execd) run(w http.ResponseWriter, r *http.Request) {
	var req RunCommandRequest
	if !e.readJSON(w, r, &req) {
		return
	}
	cmd, err := e.commandOf(r.Context(), req)
	if err != nil {
		WriteError(w, http.StatusBadRequest, CodeInvalidRequest, "invalid request, validation error "+err.Error())
		return
	}
	c := &command{id: newCommandID(), content: req.Command, background: req.Background, startedAt: time.Now()}
	if c.background {
		c.log = e.newLog()
	}
	if err := e.cmds.add(c); err != nil {
		WriteError(w, http.StatusTooManyRequests, CodeRuntimeError, err.Error())
		return
	}
	if c.background {
		// Upstream gives a background command one output file for both
		// streams; two streams through a provider could reorder, one fd
		// cannot.
		cmd.Args[2] = "exec 2>&1\n" + cmd.Args[2]
		if err := e.startBackground(c, cmd); err != nil {
			e.opts.Logger.Warn("execd: starting a background command failed", "sandbox", e.sb.ID(), "error", err)
			WriteError(w, http.StatusInternalServerError, CodeRuntimeError, "error running commands "+err.Error())
			return
		}
		ew := newEventWriter(w)
		ew.send(StreamEvent{Type: EventInit, Text: c.id})
		ew.send(StreamEvent{Type: EventComplete, ExecutionTime: time.Since(c.startedAt).Milliseconds()})
		return
	}
	e.foreground(w, r, c, cmd)
}

// startBackground starts cmd with its output in c.log and a waiter that
// records its end.
func (e *Execd) startBackground(c *command, cmd sandbox.Command) error {
	cmd.Stdout, cmd.Stderr = c.log, c.log
	p, err := e.sb.Exec(e.life, cmd)
	if err != nil {
		c.finish(255, err.Error())
		return err
	}
	e.onExec()
	c.started(p)
	e.wg.Go(func() {
		code, err := p.Wait(e.life)
		c.finish(endOf(code, err, cmd.Timeout))
	})
	return nil
}

func (e *Execd) onExec() {
	if e.opts.OnExec != nil {
		e.opts.OnExec()
	}
}

// endOf is the exit code and upstream's error text of a finished command.
// A command killed at its timeout reports 137 (SIGKILL), as berth's
// providers report a killed process.
func endOf(code int, err error, timeout time.Duration) (int, string) {
	switch {
	case err == nil && code == 0:
		return 0, ""
	case err == nil:
		return code, fmt.Sprintf("exit status %d", code)
	case sandbox.ClassOf(err) == sandbox.DeadlineExceeded:
		return 137, fmt.Sprintf("signal: killed (the command's timeout of %v passed)", timeout)
	default:
		return -1, err.Error()
	}
}

// foreground runs c and streams its events. A client that goes away kills
// the command.
func (e *Execd) foreground(w http.ResponseWriter, r *http.Request, c *command, cmd sandbox.Command) {
	ew := newEventWriter(w)
	stdout, stderr := &lineEvents{typ: EventStdout, ew: ew}, &lineEvents{typ: EventStderr, ew: ew}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// init goes first, as upstream sends it once the process started; the
	// output writers are not called before Exec returns the process.
	ew.send(StreamEvent{Type: EventInit, Text: c.id})
	p, err := e.sb.Exec(e.life, cmd)
	if err != nil {
		c.finish(endOf(-1, err, 0))
		ew.send(StreamEvent{Type: EventErr, Error: &EventError{EName: "CommandExecError", EValue: err.Error(), Traceback: []string{err.Error()}}})
		return
	}
	e.onExec()
	c.started(p)
	stopPing := make(chan struct{})
	defer close(stopPing)
	go ew.pinger(stopPing)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-r.Context().Done():
			// Upstream kills the process group of a command whose stream's
			// client left; kill it so that it does not run on unobserved.
			ctx, cancel := context.WithTimeout(e.life, 10*time.Second)
			_ = p.Signal(ctx, sandbox.SIGKILL)
			cancel()
		case <-done:
		}
	}()
	code, werr := p.Wait(e.life)
	stdout.flush()
	stderr.flush()
	code, msg := endOf(code, werr, cmd.Timeout)
	c.finish(code, msg)
	if code == 0 {
		ew.send(StreamEvent{Type: EventComplete, ExecutionTime: time.Since(c.startedAt).Milliseconds()})
		return
	}
	value := strconv.Itoa(code)
	if code == -1 { // not an exit: the command's fate is unknown
		value = msg
	}
	ew.send(StreamEvent{Type: EventErr, Error: &EventError{EName: "CommandExecError", EValue: value, Traceback: []string{msg}}})
}

func (e *Execd) lookup(w http.ResponseWriter, id string) *command {
	c := e.cmds.get(id)
	if c == nil {
		WriteError(w, http.StatusNotFound, CodeInvalidRequest, fmt.Sprintf("command not found: %s", id))
	}
	return c
}

func (e *Execd) status(w http.ResponseWriter, _ *http.Request, id string) {
	if c := e.lookup(w, id); c != nil {
		WriteJSON(w, http.StatusOK, c.status())
	}
}

// logs answers a background command's output from byte offset ?cursor=
// (as upstream's execd counts it, despite its spec's "line"), with how
// much of it is no longer kept.
func (e *Execd) logs(w http.ResponseWriter, r *http.Request, id string) {
	c := e.lookup(w, id)
	if c == nil {
		return
	}
	if !c.background {
		WriteError(w, http.StatusBadRequest, CodeInvalidRequest, fmt.Sprintf("command %s is not running in background", c.id))
		return
	}
	var cursor int64
	if s := r.URL.Query().Get("cursor"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			WriteError(w, http.StatusBadRequest, CodeInvalidRequest, fmt.Sprintf("cursor %q is not a byte offset", s))
			return
		}
		cursor = n
	}
	release, err := e.opts.Budget.answer(r.Context())
	if err != nil {
		return // the client left while waiting
	}
	defer release()
	data, next, dropped := c.log.from(cursor)
	h := w.Header()
	h.Set(TailCursorHeader, strconv.FormatInt(next, 10))
	h.Set(DroppedHeader, strconv.FormatInt(dropped, 10))
	h.Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	for _, chunk := range data {
		if _, err := w.Write(chunk); err != nil {
			return
		}
	}
}

// interrupt kills a running command (DELETE /command?id=).
func (e *Execd) interrupt(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id == "" {
		WriteError(w, http.StatusBadRequest, CodeMissingQuery, "missing query parameter 'id'")
		return
	}
	c := e.lookup(w, id)
	if c == nil {
		return
	}
	if p := c.process(); p != nil {
		if err := p.Signal(r.Context(), sandbox.SIGKILL); err != nil && sandbox.ClassOf(err) != sandbox.NotFound {
			status, code := http.StatusInternalServerError, CodeRuntimeError
			if sandbox.ClassOf(err) == sandbox.NotSupported {
				status, code = http.StatusNotImplemented, CodeExecdUnsupported
			}
			WriteError(w, status, code, err.Error())
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}
