package envd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/envd/envdproto"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// keepaliveHeader carries the client's wish for keepalive events, in seconds.
const keepaliveHeader = "Keepalive-Ping-Interval"

func keepaliveOf(h http.Header) time.Duration {
	v := h.Get(keepaliveHeader)
	if v == "" {
		return 0
	}
	sec, err := strconv.ParseFloat(v, 64)
	if err != nil || sec <= 0 {
		return 0
	}
	d := time.Duration(sec * float64(time.Second))
	return min(max(d, 10*time.Millisecond), time.Hour)
}

func (s *Server) handleStart(ctx context.Context, req *connect.Request[envdproto.StartRequest], out *connect.ServerStream[envdproto.StartResponse]) error {
	msg := req.Msg
	if msg.PTY != nil {
		return connect.NewError(connect.CodeUnimplemented, errors.New("pty processes are not supported"))
	}
	if msg.Process == nil || msg.Process.Cmd == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd is required"))
	}
	if s.procs.isClosed() {
		return connect.NewError(connect.CodeUnavailable, errors.New("server is shutting down"))
	}
	p, sub := newProc(*msg.Process, msg.Tag)
	spec := StartSpec{
		Config: &p.config,
		User:   userFromHeader(req.Header()),
		Stdin:  msg.Stdin == nil || *msg.Stdin,
		Stdout: &p.stdout,
		Stderr: &p.stderr,
	}
	// Connect-Timeout-Ms is the process's lifetime, as in upstream envd; a
	// client that goes away does not kill the process.
	if dl, ok := ctx.Deadline(); ok {
		if spec.Timeout = time.Until(dl); spec.Timeout <= 0 {
			return connect.NewError(connect.CodeDeadlineExceeded, errors.New("deadline passed before start"))
		}
	}
	bp, err := s.b.Start(s.ctx, spec)
	if err != nil {
		return rpcError(err)
	}
	p.pid, p.bp = bp.PID(), bp
	if spec.Stdin {
		p.stdinSem, p.stdinOpen = make(chan struct{}, 1), true
	}
	if s.opts.OnStart != nil {
		s.opts.OnStart()
	}
	if !s.procs.add(p) {
		_ = bp.Signal(context.WithoutCancel(ctx), driver.SIGKILL)
	}
	go s.await(p)
	return s.streamEvents(ctx, p, sub, keepaliveOf(req.Header()), func(ev *envdproto.ProcessEvent) error {
		return out.Send(&envdproto.StartResponse{Event: ev})
	})
}

// await hands out the process's end event once the backend saw it end with
// all output written; then the process leaves the table.
func (s *Server) await(p *proc) {
	defer s.procs.wg.Done()
	end := p.bp.Wait()
	p.closeStdin()
	s.procs.remove(p)
	p.publish(&envdproto.ProcessEvent{End: end}, true)
}

func (s *Server) handleConnect(ctx context.Context, req *connect.Request[envdproto.ConnectRequest], out *connect.ServerStream[envdproto.ConnectResponse]) error {
	p := s.procs.find(req.Msg.Process)
	if p == nil {
		return errNoProcess(req.Msg.Process)
	}
	sub, ok := p.subscribe()
	if !ok {
		return errNoProcess(req.Msg.Process)
	}
	return s.streamEvents(ctx, p, sub, keepaliveOf(req.Header()), func(ev *envdproto.ProcessEvent) error {
		return out.Send(&envdproto.ConnectResponse{Event: ev})
	})
}

// streamEvents sends start first, then the process's events as they come,
// with keepalives while idle, until the end event or the client leaves.
func (s *Server) streamEvents(ctx context.Context, p *proc, sub *subscriber, keepalive time.Duration, send func(*envdproto.ProcessEvent) error) error {
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

func (s *Server) handleList(context.Context, *connect.Request[envdproto.ListRequest]) (*connect.Response[envdproto.ListResponse], error) {
	return connect.NewResponse(&envdproto.ListResponse{Processes: s.procs.list()}), nil
}

func (s *Server) handleSendInput(ctx context.Context, req *connect.Request[envdproto.SendInputRequest]) (*connect.Response[envdproto.SendInputResponse], error) {
	p := s.procs.find(req.Msg.Process)
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

func (s *Server) handleSendSignal(ctx context.Context, req *connect.Request[envdproto.SendSignalRequest]) (*connect.Response[envdproto.SendSignalResponse], error) {
	p := s.procs.find(req.Msg.Process)
	if p == nil {
		return nil, errNoProcess(req.Msg.Process)
	}
	var sig driver.Signal
	switch req.Msg.Signal {
	case envdproto.SignalSIGKILL:
		sig = driver.SIGKILL
	case envdproto.SignalSIGTERM:
		sig = driver.SIGTERM
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("signal %q is not supported", req.Msg.Signal))
	}
	if err := p.bp.Signal(ctx, sig); err != nil {
		if errdefs.ClassOf(err) == errdefs.NotFound {
			return nil, errNoProcess(req.Msg.Process)
		}
		return nil, rpcError(err)
	}
	return connect.NewResponse(&envdproto.SendSignalResponse{}), nil
}

func (s *Server) handleCloseStdin(_ context.Context, req *connect.Request[envdproto.CloseStdinRequest]) (*connect.Response[envdproto.CloseStdinResponse], error) {
	p := s.procs.find(req.Msg.Process)
	if p == nil {
		return nil, errNoProcess(req.Msg.Process)
	}
	p.closeStdin()
	return connect.NewResponse(&envdproto.CloseStdinResponse{}), nil
}

func (s *Server) handleUpdate(_ context.Context, req *connect.Request[envdproto.UpdateRequest]) (*connect.Response[envdproto.UpdateResponse], error) {
	if s.procs.find(req.Msg.Process) == nil {
		return nil, errNoProcess(req.Msg.Process)
	}
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("pty resize is not supported: processes have no pty"))
}
