package daytona

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/berth-sh/berth/providers/internal/rest"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
	"github.com/berth-sh/berth/sandbox/retry"
)

// splitHeader asks the toolbox for the raw log, stdout and stderr lines
// still marked, rather than their markers stripped and the streams merged.
const splitHeader = "X-Daytona-Split-Output"

// stdinChunk is how much stdin one input call carries.
const stdinChunk = 32 << 10

// streamGrace is how long the log stream may stay open after the command
// has ended before the driver reads the rest of the log itself (the toolbox
// closes a stream about a second after the exit).
const streamGrace = 300 * time.Millisecond

// process is a command run in its own toolbox session.
type process struct {
	s      *Sandbox
	base   string // toolbox URL
	sid    string // session ID
	cmdID  string // the toolbox's command ID
	xid    string // the wrapper's execution ID
	stdout io.Writer
	stderr io.Writer

	ctx      context.Context // following the command; ends on Close or timeout
	cancel   context.CancelFunc
	timeout  time.Duration
	timedOut atomic.Bool

	done chan struct{}
	code int
	err  error
}

var _ driver.Process = (*process)(nil)

// Exec starts cmd in a new toolbox session and returns once the toolbox has
// accepted it. Output is followed by a goroutine until the command ends.
func (s *Sandbox) Exec(ctx context.Context, cmd driver.Command) (driver.Process, error) {
	if cmd.User != "" && cmd.User != s.user {
		return nil, errdefs.Errorf(errdefs.NotSupported, "daytona: commands run as the sandbox's user %q; running as %q is not supported (set Spec.User)", s.user, cmd.User)
	}
	xid := randomHex(8)
	script, err := wrapperScript(xid, cmd)
	if err != nil {
		return nil, err
	}
	base, err := s.toolboxURL(ctx)
	if err != nil {
		return nil, err
	}
	pr := &process{s: s, base: base, sid: "berth-" + xid, xid: xid, stdout: cmd.Stdout, stderr: cmd.Stderr,
		timeout: cmd.Timeout, done: make(chan struct{})}
	c := s.p.c
	if err := c.do(ctx, rest.Call{Method: http.MethodPost, URL: base + "/process/session", JSON: map[string]string{"sessionId": pr.sid}}, nil); err != nil {
		return nil, err
	}
	var started struct {
		CmdID string `json:"cmdId"`
	}
	req := map[string]any{"command": script, "runAsync": true, "async": true, "suppressInputEcho": true}
	if err := c.do(ctx, rest.Call{Method: http.MethodPost, URL: pr.sessionURL("exec"), JSON: req}, &started); err != nil || started.CmdID == "" {
		pr.deleteSession()
		if err == nil {
			err = errdefs.Errorf(errdefs.Unavailable, "daytona: the toolbox started the command without naming it")
		}
		return nil, err
	}
	pr.cmdID = started.CmdID
	pr.ctx, pr.cancel = context.WithCancel(s.life)
	var timer *time.Timer
	if cmd.Timeout > 0 {
		timer = time.AfterFunc(cmd.Timeout, func() {
			pr.timedOut.Store(true)
			pr.cancel()
		})
	}
	s.procs.Add(1)
	go func() {
		defer s.procs.Done()
		pr.run()
		if timer != nil {
			timer.Stop()
		}
	}()
	if cmd.Stdin != nil {
		// Not counted in procs: a Stdin that never ends must not block Close.
		go pr.feedStdin(cmd.Stdin)
	}
	return pr, nil
}

func (pr *process) sessionURL(rest string) string {
	return pr.base + "/process/session/" + url.PathEscape(pr.sid) + "/" + rest
}

func (pr *process) commandURL(rest string) string {
	u := pr.sessionURL("command/" + url.PathEscape(pr.cmdID))
	if rest != "" {
		u += "/" + rest
	}
	return u
}

// PID is not known to the toolbox; it reports 0.
func (pr *process) PID() int { return 0 }

// Wait waits for the command to end and its output to be delivered.
func (pr *process) Wait(ctx context.Context) (int, error) {
	select {
	case <-pr.done:
		return pr.code, pr.err
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

// Signal sends sig to the program through a one-off toolbox command.
func (pr *process) Signal(ctx context.Context, sig driver.Signal) error {
	select {
	case <-pr.done:
		return errdefs.Errorf(errdefs.NotFound, "daytona: the process has ended")
	default:
	}
	script, err := signalScript(pr.xid, sig)
	if err != nil {
		return err
	}
	var out struct {
		ExitCode int    `json:"exitCode"`
		Result   string `json:"result"`
	}
	if err := pr.s.p.c.do(ctx, rest.Call{Method: http.MethodPost, URL: pr.base + "/process/execute",
		JSON: map[string]any{"command": script, "timeout": 30}}, &out); err != nil {
		return err
	}
	switch out.ExitCode {
	case 0:
		return nil
	case 3:
		return errdefs.Errorf(errdefs.NotFound, "daytona: the process has ended")
	default:
		return errdefs.Errorf(errdefs.Unavailable, "daytona: sending %s failed (exit %d): %s", sig, out.ExitCode, tailLines(out.Result, 5, 500))
	}
}

// run follows the command to its end and records the outcome.
func (pr *process) run() {
	d := newDemux(pr.stdout, pr.stderr)
	code, err := pr.follow(d)
	d.flush()
	switch {
	case pr.timedOut.Load():
		// Deleting the session kills the command and everything it started.
		pr.deleteSession()
		code, err = -1, errdefs.Errorf(errdefs.DeadlineExceeded, "daytona: the command ran past its %v timeout and was killed", pr.timeout)
	case err != nil && pr.s.life.Err() != nil:
		code, err = -1, errdefs.Errorf(errdefs.InvalidArgument, "daytona: the sandbox handle was closed while the command ran")
	case err == nil:
		if werr := d.writeErr(); werr != nil {
			err = fmt.Errorf("daytona: delivering output: %w", werr)
		}
	}
	pr.code, pr.err = code, err
	close(pr.done)
	if err == nil {
		pr.deleteSession()
	}
}

// follow delivers the command's log until the command has ended and the
// log is complete, and returns the exit code. The log streams over the
// toolbox's WebSocket; if that fails or drops, the full log is polled and
// read on from the offset the stream reached.
func (pr *process) follow(d *demux) (int, error) {
	opts := pr.s.p.opts
	wsctx, stopStream := context.WithCancel(pr.ctx)
	defer stopStream()
	chunks, streamEnd := pr.stream(wsctx)
	streaming := chunks != nil
	poll := opts.PollMin
	timer := time.NewTimer(poll)
	defer timer.Stop()
	var exit *int
	var grace <-chan time.Time
	complete := false // the log has been read to its end after the exit
	for !complete {
		select {
		case b, ok := <-chunks:
			if ok {
				d.feed(b)
				continue
			}
			chunks = nil
			err := <-streamEnd
			if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
				// The toolbox closes the stream once the exit code is written,
				// which it writes after the last output line.
				complete = true
				break
			}
			opts.Logger.Debug("daytona log stream dropped; polling the log", "session", pr.sid, "offset", d.n, "error", err)
			streaming = false
			timer.Reset(0)
		case <-timer.C:
			if exit == nil {
				var err error
				if exit, err = pr.exitCode(pr.ctx); err != nil {
					return -1, err
				}
			}
			switch {
			case !streaming:
				if err := pr.readLog(d); err != nil {
					return -1, err
				}
				complete = exit != nil // read after the exit: nothing more can come
			case exit != nil && grace == nil:
				grace = time.After(streamGrace)
			}
			poll = min(poll*3/2, opts.PollMax)
			timer.Reset(poll)
		case <-grace:
			stopStream()
			for b := range chunks {
				d.feed(b)
			}
			chunks = nil
			if err := pr.readLog(d); err != nil {
				return -1, err
			}
			complete = true
		case <-pr.ctx.Done():
			stopStream()
			drain(chunks)
			return -1, pr.ctx.Err()
		}
	}
	stopStream()
	drain(chunks)
	for exit == nil {
		var err error
		if exit, err = pr.exitCode(pr.ctx); err != nil {
			return -1, err
		}
		if exit == nil {
			if err := retry.Sleep(pr.ctx, poll); err != nil {
				return -1, err
			}
			poll = min(poll*3/2, opts.PollMax)
		}
	}
	return *exit, nil
}

// stream opens the log's WebSocket and returns its chunks; the channel
// closes when the stream ends, and the end's error is then on the second
// channel. Nil channels mean there is no stream.
func (pr *process) stream(ctx context.Context) (<-chan []byte, <-chan error) {
	u := pr.commandURL("logs") + "?follow=true"
	// The REST client's transport adds the key, for the toolbox's origin
	// only.
	h := http.Header{}
	h.Set(splitHeader, "true")
	conn, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: pr.s.p.c.rc.HTTPClient(), HTTPHeader: h})
	if err != nil {
		pr.s.p.opts.Logger.Debug("daytona log stream unavailable; polling", "session", pr.sid, "error", pr.s.p.c.redact(err.Error()))
		return nil, nil
	}
	conn.SetReadLimit(64 << 20)
	chunks := make(chan []byte, 16)
	end := make(chan error, 1)
	go func() {
		defer close(chunks)
		defer conn.CloseNow()
		for {
			_, b, err := conn.Read(ctx)
			if err != nil {
				end <- err
				return
			}
			select {
			case chunks <- b:
			case <-ctx.Done():
				end <- ctx.Err()
				return
			}
		}
	}()
	return chunks, end
}

// drain waits for a stopped stream's reader to end.
func drain(chunks <-chan []byte) {
	if chunks != nil {
		for range chunks {
		}
	}
}

// exitCode asks the toolbox whether the command has ended.
func (pr *process) exitCode(ctx context.Context) (*int, error) {
	var c struct {
		ExitCode *int `json:"exitCode"`
	}
	if err := pr.s.p.c.do(ctx, rest.Call{Method: http.MethodGet, URL: pr.commandURL("")}, &c); err != nil {
		return nil, err
	}
	return c.ExitCode, nil
}

// readLog reads the whole log and feeds what d has not seen. Asked for the
// split, the daemon answers the marked log as JSON {output, stdout,
// stderr} (older daemons: as plain text); either way the marked log is
// what d reads on from its offset.
func (pr *process) readLog(d *demux) error {
	resp, err := pr.s.p.c.send(pr.ctx, rest.Call{Method: http.MethodGet, URL: pr.commandURL("logs"), Header: http.Header{splitHeader: {"true"}}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body := io.Reader(resp.Body)
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		var logs struct {
			Output string `json:"output"`
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxLogJSON)).Decode(&logs); err != nil {
			return errdefs.Errorf(errdefs.Unavailable, "daytona: decoding the command log: %w", err)
		}
		body = strings.NewReader(logs.Output)
	}
	if skipped, err := io.CopyN(io.Discard, body, d.n); err != nil {
		return errdefs.Errorf(errdefs.Unavailable, "daytona: the command log is %d bytes, shorter than the %d already read: %w", skipped, d.n, err)
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			d.feed(buf[:n])
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return errdefs.Errorf(errdefs.Unavailable, "daytona: reading the command log: %w", err)
		}
	}
}

// maxLogJSON bounds a whole command log read as JSON, which is held in
// memory; the stream is the way for output larger than that.
const maxLogJSON = 64 << 20

// feedStdin sends r to the command in base64 lines and then the end mark.
// It stops early when the command has ended.
func (pr *process) feedStdin(r io.Reader) {
	send := func(data string) bool {
		select {
		case <-pr.done:
			return false
		default:
		}
		err := pr.s.p.c.do(pr.ctx, rest.Call{Method: http.MethodPost, URL: pr.commandURL("input"), JSON: map[string]string{"data": data}}, nil)
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			pr.s.p.opts.Logger.Debug("daytona stdin stopped", "session", pr.sid, "error", err)
		}
		return err == nil
	}
	buf := make([]byte, stdinChunk)
	for {
		n, err := r.Read(buf)
		if n > 0 && !send("d"+base64.StdEncoding.EncodeToString(buf[:n])) {
			return
		}
		if err != nil {
			send("e") // EOF or a failed read: either way stdin ends here
			return
		}
	}
}

// deleteSession ends the session (killing what still runs in it), bounded
// and detached from the caller's context.
func (pr *process) deleteSession() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := pr.s.p.c.do(ctx, rest.Call{Method: http.MethodDelete, URL: pr.base + "/process/session/" + url.PathEscape(pr.sid)}, nil)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		pr.s.p.opts.Logger.Debug("daytona session delete failed", "session", pr.sid, "error", err)
	}
}
