package openenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/coder/websocket"
)

// The envelopes of the client's messages (OpenEnv's WSResetMessage,
// WSStepMessage, WSStateMessage, WSCloseMessage: extra fields forbidden).
var (
	typeField  = Field{Name: "type", Kind: String, Description: "Message type"}
	resetFrame = &Model{Title: "WSResetMessage", Fields: []Field{typeField,
		{Name: "data", Kind: Object, Default: map[string]any{}, Description: "Optional reset parameters (seed, episode_id, etc.)"}}}
	stepFrame = &Model{Title: "WSStepMessage", Fields: []Field{typeField,
		{Name: "data", Kind: Object, Required: true, Description: "Action data conforming to environment's action schema"}}}
	stateFrame = &Model{Title: "WSStateMessage", Fields: []Field{typeField}}
	closeFrame = &Model{Title: "WSCloseMessage", Fields: []Field{typeField}}
)

type incoming struct {
	typ websocket.MessageType
	b   []byte
	err error
}

// serveWS runs one session: one Env for the life of the connection.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept has answered
	}
	c.SetReadLimit(s.opts.MaxFrameBytes)
	defer c.CloseNow()

	if err := s.reserve(); err != nil {
		e := ErrorData{Message: err.Error(), Code: SessionError}
		var ce *CapacityError
		if errors.As(err, &ce) {
			e = ErrorData{Message: err.Error(), Code: CapacityReached, Extra: map[string]any{"active_sessions": ce.Active, "max_sessions": ce.Max}}
		}
		s.send(c, errorFrame(e))
		_ = c.Close(websocket.StatusNormalClosure, "")
		return
	}
	// The slot is free before the client sees the close (as OpenEnv
	// destroys the session before closing the socket), so a client that
	// saw it can open the next session at once.
	freed := false
	free := func() {
		if !freed {
			freed = true
			s.free()
		}
	}
	defer s.sessions.Done()
	defer free()

	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	env, err := s.opts.Factory(ctx)
	if err != nil {
		// The cause stays in the server's log; the client gets OpenEnv's words.
		s.opts.Logger.Warn("environment factory failed", "env", s.opts.Info.Name, "error", err)
		s.send(c, errorFrame(ErrorData{Message: factoryMessage(s.opts.Info.Name), Code: FactoryError,
			Extra: map[string]any{"factory_name": s.opts.Info.Name}}))
		free()
		_ = c.Close(websocket.StatusNormalClosure, "")
		return
	}

	// The reader has a context of its own: cancelling the one a Read waits
	// on drops the connection, and on shutdown the close frame comes first.
	readCtx, stopReading := context.WithCancel(context.Background())
	defer stopReading()
	frames := make(chan incoming)
	go func() {
		for {
			typ, b, err := c.Read(readCtx)
			if err != nil {
				// The client is gone: whatever the Env is doing for it stops.
				cancel()
			}
			select {
			case frames <- incoming{typ, b, err}:
			case <-readCtx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()

	code, reason := s.loop(ctx, c, env, frames)
	s.closeEnv(env)
	free()
	if code != 0 {
		_ = c.Close(code, reason)
	}
}

// loop answers messages until the session ends, and says how to close the
// connection (0: it is already gone).
func (s *Server) loop(ctx context.Context, c *websocket.Conn, env Env, frames <-chan incoming) (websocket.StatusCode, string) {
	var idle <-chan time.Time
	var timer *time.Timer
	if s.opts.IdleTimeout > 0 {
		timer = time.NewTimer(s.opts.IdleTimeout)
		defer timer.Stop()
		idle = timer.C
	}
	for {
		select {
		case <-ctx.Done():
			return websocket.StatusGoingAway, "server shutting down"
		case <-idle:
			return websocket.StatusPolicyViolation, fmt.Sprintf("no message for %v", s.opts.IdleTimeout)
		case in := <-frames:
			if in.err != nil {
				return 0, ""
			}
			if in.typ != websocket.MessageText {
				s.send(c, errorFrame(ErrorData{Message: "binary frames are not messages; send JSON text", Code: SessionError}))
				return websocket.StatusUnsupportedData, "binary frame"
			}
			answer, end := s.dispatch(ctx, env, in.b)
			if end != nil {
				if answer != nil {
					s.send(c, answer)
				}
				return *end, ""
			}
			if !s.send(c, answer) {
				return 0, ""
			}
			if timer != nil {
				timer.Reset(s.opts.IdleTimeout)
			}
		}
	}
}

// send writes one answer. Its context ends only by the write timeout:
// coder/websocket closes a connection when the context of a call on it
// ends, and a session that is ending still owes its client a close frame.
func (s *Server) send(c *websocket.Conn, b []byte) bool {
	wctx, cancel := context.WithTimeout(context.Background(), s.opts.WriteTimeout)
	defer cancel()
	return c.Write(wctx, websocket.MessageText, b) == nil
}

var (
	normalClosure = websocket.StatusNormalClosure
	policyClosure = websocket.StatusPolicyViolation
)

// dispatch answers one text frame as OpenEnv's websocket_endpoint does. A
// non-nil end closes the session with that status after the answer.
func (s *Server) dispatch(ctx context.Context, env Env, raw []byte) (answer []byte, end *websocket.StatusCode) {
	defer func() {
		if p := recover(); p != nil {
			s.opts.Logger.Error("environment panicked", "env", s.opts.Info.Name, "panic", p)
			answer, end = errorFrame(ErrorData{Message: "internal error", Code: ExecutionError}), nil
		}
	}()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return errorFrame(ErrorData{Message: "Invalid JSON: " + err.Error(), Code: InvalidJSON}), nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		// OpenEnv fails the whole session on a frame that is JSON but not
		// an object.
		return errorFrame(ErrorData{Message: "a message must be a JSON object", Code: SessionError}), &policyClosure
	}
	typ, isString := obj["type"].(string)
	if !isString {
		typ = ""
	}
	invalid := func(errs []FieldError) []byte {
		return errorFrame(ErrorData{Message: "Invalid message", Code: ValidationError, Extra: map[string]any{"errors": errs}})
	}
	// reply is the frame of typ holding v, or the EXECUTION_ERROR of err.
	reply := func(typ string, v any, err error) []byte {
		if err == nil {
			var b []byte
			if b, err = dataFrame(typ, v); err == nil {
				return b
			}
		}
		return errorFrame(ErrorData{Message: err.Error(), Code: ExecutionError})
	}
	switch {
	case isString && typ == TypeReset:
		msg, errs := resetFrame.Validate(raw)
		if errs != nil {
			return invalid(errs), nil
		}
		args := map[string]json.RawMessage{}
		if d, ok := msg["data"]; ok {
			_ = json.Unmarshal(d, &args)
		}
		obs, err := env.Reset(ctx, args)
		return reply(TypeObservation, obs, err), nil
	case isString && typ == TypeStep:
		msg, errs := stepFrame.Validate(raw)
		if errs != nil {
			return invalid(errs), nil
		}
		if _, errs := s.opts.Info.Action.Validate(msg["data"]); errs != nil {
			return invalid(errs), nil
		}
		obs, err := env.Step(ctx, msg["data"])
		return reply(TypeObservation, obs, err), nil
	case isString && typ == TypeState:
		if _, errs := stateFrame.Validate(raw); errs != nil {
			return invalid(errs), nil
		}
		st, err := env.State(ctx)
		return reply(TypeState, st, err), nil
	case isString && typ == TypeClose:
		if _, errs := closeFrame.Validate(raw); errs != nil {
			return invalid(errs), nil
		}
		return nil, &normalClosure
	}
	shown := typ
	if t, present := obj["type"]; present && !isString {
		// Python formats what it got: None for null, else its repr.
		shown = "None"
		if t != nil {
			b, _ := json.Marshal(t)
			shown = string(b)
		}
	}
	return errorFrame(ErrorData{Message: "Unknown message type: " + shown, Code: UnknownType}), nil
}
