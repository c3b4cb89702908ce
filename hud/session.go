package hud

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// control runs one control session for the connection's lifetime.
func (s *Server) control(f *framer, first *Request) {
	id := newSessionID()
	sess, err := s.env.NewSession(s.ctx, id)
	if err != nil {
		if hasID(first.ID) {
			_ = f.write(errorReply(first.ID, err))
		}
		return
	}
	cur := &entry{id: id, s: sess, live: true}
	s.mu.Lock()
	s.sessions[id] = cur
	s.mu.Unlock()

	req, vanished := first, false
	for {
		var bye bool
		cur, bye = s.dispatch(f, cur, req)
		if bye {
			s.end(cur)
			return
		}
		line, err := f.read(s.lim.HeartbeatWindow, s.lim.Frame)
		if err != nil {
			// Silence past the heartbeat window on an idle session: the
			// client is gone without closing (HUD's own client kills itself
			// after one missed heartbeat), so its session ends now.
			vanished = errors.Is(err, errIdle) && !s.isClosed()
			s.refuse(f, err)
			break
		}
		req = new(Request)
		if err := json.Unmarshal(line, req); err != nil {
			_ = f.write(errorFrame(nil, CodeParseError, "parse error"))
			break
		}
	}
	if vanished {
		s.end(cur)
		return
	}
	s.detach(cur)
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// detach is a dropped connection: a session with a task in progress is
// parked for the heartbeat window (a hello with its id resumes it), any
// other is ended.
func (s *Server) detach(e *entry) {
	if !e.s.InProgress() {
		s.end(e)
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.end(e)
		return
	}
	e.live = false
	e.timer = time.AfterFunc(s.lim.HeartbeatWindow, func() { s.expire(e) })
	s.mu.Unlock()
	s.log.Info("hud: session parked", "window", s.lim.HeartbeatWindow)
}

// expire ends a parked session whose window passed without a resume.
func (s *Server) expire(e *entry) {
	s.mu.Lock()
	if e.live || s.sessions[e.id] != e {
		s.mu.Unlock()
		return
	}
	delete(s.sessions, e.id)
	s.mu.Unlock()
	s.log.Info("hud: parked session expired")
	s.closeSession(e)
}

// end forgets the session and closes it.
func (s *Server) end(e *entry) {
	s.mu.Lock()
	if s.sessions[e.id] == e {
		delete(s.sessions, e.id)
	}
	if e.timer != nil {
		e.timer.Stop()
	}
	s.mu.Unlock()
	s.closeSession(e)
}

func (s *Server) closeSession(e *entry) {
	ctx, cancel := context.WithTimeout(context.Background(), s.lim.CloseTimeout)
	defer cancel()
	e.s.Close(ctx)
}

// dispatch answers one request; it returns the connection's session (a
// hello may resume another) and whether the session said bye.
func (s *Server) dispatch(f *framer, cur *entry, req *Request) (*entry, bool) {
	reply := func(result any, err error) {
		if !hasID(req.ID) {
			return
		}
		if err != nil {
			_ = f.write(errorReply(req.ID, err))
			return
		}
		_ = f.write(resultFrame(req.ID, result))
	}
	params := map[string]any{}
	if len(req.Params) > 0 && string(req.Params) != "null" {
		if err := json.Unmarshal(req.Params, &params); err != nil {
			reply(nil, Errorf(CodeInvalidParams, "%s: params must be an object", req.Method))
			return cur, false
		}
	}
	ctx := s.ctx
	switch req.Method {
	case MethodHello:
		next, err := s.resume(cur, params)
		if err != nil {
			reply(nil, err)
			return cur, false
		}
		cur = next
		reply(&Manifest{SessionID: cur.id, Env: s.env.Info(), Bindings: cur.s.Bindings()}, nil)
	case MethodTasksList:
		tasks, err := s.env.ListTasks(ctx)
		reply(map[string]any{"tasks": tasks}, err)
	case MethodTasksStart:
		id, ok := params["id"].(string)
		if !ok {
			reply(nil, Errorf(CodeInvalidParams, "tasks.start: 'id' must be a string"))
			break
		}
		args := map[string]any{}
		if a, present := params["args"]; present && a != nil {
			if args, ok = a.(map[string]any); !ok {
				reply(nil, Errorf(CodeInvalidParams, "tasks.start: 'args' must be an object"))
				break
			}
		}
		reply(cur.s.Start(ctx, id, args))
	case MethodTasksGrade:
		reply(cur.s.Grade(ctx, params))
	case MethodCancel:
		err := cur.s.Cancel(ctx)
		reply(map[string]any{"cancelled": true}, err)
	case MethodBye:
		err := cur.s.Cancel(ctx)
		reply(map[string]any{"goodbye": true}, err)
		return cur, true
	default:
		reply(nil, Errorf(CodeMethodNotFound, "method not found: %s", req.Method))
	}
	return cur, false
}

// resume handles hello's session_id: absent or the connection's own, the
// session stays; a parked session's id moves this connection onto it, and
// the session it leaves is detached.
func (s *Server) resume(cur *entry, params map[string]any) (*entry, error) {
	raw, present := params["session_id"]
	if !present || raw == nil {
		return cur, nil
	}
	want, ok := raw.(string)
	if !ok {
		return nil, Errorf(CodeInvalidParams, "hello: 'session_id' must be a string")
	}
	if want == cur.id {
		return cur, nil
	}
	s.mu.Lock()
	e := s.sessions[want]
	switch {
	case e != nil && e.live:
		s.mu.Unlock()
		return nil, Errorf(CodeInvalidRequest, "session %s has a live connection", pyRepr(want))
	case e == nil || !e.s.InProgress():
		s.mu.Unlock()
		return nil, Errorf(CodeInvalidRequest, "unknown session: %s", pyRepr(want))
	}
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	e.live = true
	s.mu.Unlock()
	s.detach(cur)
	return e, nil
}
