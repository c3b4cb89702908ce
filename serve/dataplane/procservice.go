package dataplane

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/envd/envdproto"
	"github.com/berth-sh/berth/sandbox"
)

// keepaliveHeader carries the client's wish for keepalive events, in seconds.
const keepaliveHeader = "Keepalive-Ping-Interval"

func keepaliveOf(h http.Header) time.Duration {
	sec, err := strconv.ParseFloat(h.Get(keepaliveHeader), 64)
	if err != nil || sec <= 0 {
		return 0
	}
	return min(max(time.Duration(sec*float64(time.Second)), 10*time.Millisecond), time.Hour)
}

// userOf reads the envd caller from Authorization: Basic base64("user:").
func userOf(h http.Header) string {
	v, ok := strings.CutPrefix(h.Get("Authorization"), "Basic ")
	if !ok {
		return ""
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
	if err != nil {
		return ""
	}
	u, _, _ := strings.Cut(string(b), ":")
	return u
}

func (h *Handler) handleStart(ctx context.Context, req *connect.Request[envdproto.StartRequest], out *connect.ServerStream[envdproto.StartResponse]) error {
	msg := req.Msg
	if msg.PTY != nil {
		return connect.NewError(connect.CodeUnimplemented, errors.New("pty processes are not supported by this sandbox's provider through berth serve"))
	}
	if msg.Process == nil || msg.Process.Cmd == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd is required"))
	}
	cfg := *msg.Process
	cmd := sandbox.Command{
		Args: append([]string{cfg.Cmd}, cfg.Args...),
		Env:  cfg.Envs,
		User: userOf(req.Header()),
	}
	if cfg.Cwd != nil && *cfg.Cwd != "" {
		dir, err := h.resolve(*cfg.Cwd)
		if err != nil {
			return err
		}
		cmd.Dir = dir
	} else if home, ok := h.home(); ok {
		cmd.Dir = home
	}
	if cmd.Dir != "" {
		cfg.Cwd = &cmd.Dir
	}
	// Connect-Timeout-Ms is the process's lifetime, as in upstream envd; a
	// client that goes away does not kill the process.
	if dl, ok := ctx.Deadline(); ok {
		if cmd.Timeout = time.Until(dl); cmd.Timeout <= 0 {
			return connect.NewError(connect.CodeDeadlineExceeded, errors.New("deadline passed before start"))
		}
	}
	p := newProc(cfg, msg.Tag)
	sub, _ := p.subscribe()
	cmd.Stdout, cmd.Stderr = outWriter{p: p}, outWriter{p: p, stderr: true}
	if msg.Stdin == nil || *msg.Stdin {
		pr, pw := io.Pipe()
		cmd.Stdin, p.stdin = pr, pw
	}
	handle, err := h.sb.Exec(h.ctx, cmd)
	if err != nil {
		p.closeStdin()
		if sandbox.ClassOf(err) == sandbox.NotFound {
			// Clients read NotFound from Start as "no such program"; here it
			// is the working directory.
			return connect.NewError(connect.CodeInvalidArgument, err)
		}
		return rpcError(err)
	}
	p.handle, p.pid = handle, handle.PID()
	if h.opts.OnExec != nil {
		h.opts.OnExec()
	}
	if !h.procs.add(p) {
		_ = handle.Signal(context.WithoutCancel(ctx), sandbox.SIGKILL)
	}
	h.procs.wg.Add(1)
	go h.await(p)
	return streamEvents(ctx, p, sub, keepaliveOf(req.Header()), func(ev *envdproto.ProcessEvent) error {
		return out.Send(&envdproto.StartResponse{Event: ev})
	})
}

// await waits for the process and hands out its end event.
func (h *Handler) await(p *proc) {
	defer h.procs.wg.Done()
	code, err := p.handle.Wait(h.ctx)
	p.closeStdin()
	h.procs.remove(p)
	end := &envdproto.EndEvent{ExitCode: int32(code), Exited: true, Status: fmt.Sprintf("exit status %d", code)}
	switch {
	case err == nil:
	case sandbox.ClassOf(err) == sandbox.DeadlineExceeded:
		msg := "process timed out"
		end.Exited, end.Status, end.Error = false, "killed", &msg
	case h.ctx.Err() != nil:
		msg := "the sandbox was deleted"
		end.ExitCode, end.Exited, end.Status, end.Error = -1, false, "unknown", &msg
	default:
		msg := err.Error()
		end.ExitCode, end.Exited, end.Status, end.Error = -1, false, "unknown", &msg
	}
	p.publish(&envdproto.ProcessEvent{End: end}, true)
	close(p.done)
}

func (h *Handler) handleConnect(ctx context.Context, req *connect.Request[envdproto.ConnectRequest], out *connect.ServerStream[envdproto.ConnectResponse]) error {
	p := h.procs.find(req.Msg.Process)
	if p == nil {
		return errNoProcess(req.Msg.Process)
	}
	sub, ok := p.subscribe()
	if !ok {
		return errNoProcess(req.Msg.Process)
	}
	return streamEvents(ctx, p, sub, keepaliveOf(req.Header()), func(ev *envdproto.ProcessEvent) error {
		return out.Send(&envdproto.ConnectResponse{Event: ev})
	})
}

// streamEvents sends start first, then the process's events as they come,
// with keepalives while idle, until the end event or the client leaves.
func streamEvents(ctx context.Context, p *proc, sub *subscriber, keepalive time.Duration, send func(*envdproto.ProcessEvent) error) error {
	defer p.unsubscribe(sub)
	if err := send(&envdproto.ProcessEvent{Start: &envdproto.StartEvent{PID: uint32(p.pid)}}); err != nil {
		return err
	}
	var tick <-chan time.Time
	if keepalive > 0 {
		t := time.NewTicker(keepalive)
		defer t.Stop()
		tick = t.C
	}
	idle := true
	for {
		select {
		case ev := <-sub.ch:
			if err := send(ev); err != nil {
				return err
			}
			if ev.End != nil {
				return nil
			}
			idle = false
		case <-tick:
			if idle {
				if err := send(&envdproto.ProcessEvent{Keepalive: &envdproto.KeepAlive{}}); err != nil {
					return err
				}
			}
			idle = true
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func errNoProcess(sel *envdproto.ProcessSelector) error {
	switch {
	case sel == nil:
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process selector is required"))
	case sel.PID != nil:
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", *sel.PID))
	case sel.Tag != nil:
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("process with tag %q not found", *sel.Tag))
	}
	return connect.NewError(connect.CodeInvalidArgument, errors.New("process selector is empty"))
}

func (h *Handler) handleList(context.Context, *connect.Request[envdproto.ListRequest]) (*connect.Response[envdproto.ListResponse], error) {
	return connect.NewResponse(&envdproto.ListResponse{Processes: h.procs.list()}), nil
}

func (h *Handler) handleSendInput(ctx context.Context, req *connect.Request[envdproto.SendInputRequest]) (*connect.Response[envdproto.SendInputResponse], error) {
	p := h.procs.find(req.Msg.Process)
	if p == nil {
		return nil, errNoProcess(req.Msg.Process)
	}
	in := req.Msg.Input
	if in != nil && len(in.PTY) > 0 {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("pty input is not supported"))
	}
	if in != nil && len(in.Stdin) > 0 {
		if err := p.writeStdin(ctx, in.Stdin); err != nil {
			return nil, err
		}
	}
	return connect.NewResponse(&envdproto.SendInputResponse{}), nil
}

func (h *Handler) handleSendSignal(ctx context.Context, req *connect.Request[envdproto.SendSignalRequest]) (*connect.Response[envdproto.SendSignalResponse], error) {
	p := h.procs.find(req.Msg.Process)
	if p == nil {
		return nil, errNoProcess(req.Msg.Process)
	}
	var sig sandbox.Signal
	switch req.Msg.Signal {
	case envdproto.SignalSIGKILL:
		sig = sandbox.SIGKILL
	case envdproto.SignalSIGTERM:
		sig = sandbox.SIGTERM
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("signal %q is not supported", req.Msg.Signal))
	}
	if err := p.handle.Signal(ctx, sig); err != nil {
		if sandbox.ClassOf(err) == sandbox.NotFound {
			return nil, errNoProcess(req.Msg.Process)
		}
		return nil, rpcError(err)
	}
	return connect.NewResponse(&envdproto.SendSignalResponse{}), nil
}

func (h *Handler) handleCloseStdin(_ context.Context, req *connect.Request[envdproto.CloseStdinRequest]) (*connect.Response[envdproto.CloseStdinResponse], error) {
	p := h.procs.find(req.Msg.Process)
	if p == nil {
		return nil, errNoProcess(req.Msg.Process)
	}
	p.closeStdin()
	return connect.NewResponse(&envdproto.CloseStdinResponse{}), nil
}

func (h *Handler) handleUpdate(_ context.Context, req *connect.Request[envdproto.UpdateRequest]) (*connect.Response[envdproto.UpdateResponse], error) {
	if h.procs.find(req.Msg.Process) == nil {
		return nil, errNoProcess(req.Msg.Process)
	}
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("pty resize is not supported: processes have no pty"))
}
