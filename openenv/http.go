package openenv

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"
)

func ptr(f float64) *float64 { return &f }

// The bodies of POST /reset and POST /step (OpenEnv's ResetRequest and
// StepRequest: extra fields allowed and passed on).
var (
	resetRequest = &Model{Title: "ResetRequest", AllowExtra: true, Fields: []Field{
		{Name: "seed", Kind: Integer, Nullable: true, GE: ptr(0), Description: "Random seed for reproducible episodes"},
		{Name: "episode_id", Kind: String, Nullable: true, MaxLength: 255, Description: "Custom episode identifier"},
	}}
	stepRequest = &Model{Title: "StepRequest", AllowExtra: true, Fields: []Field{
		{Name: "action", Kind: Object, Required: true, Description: "Action to execute, must conform to environment's action schema"},
		{Name: "timeout_s", Kind: Number, Nullable: true, GT: ptr(0), Description: "Optional timeout in seconds for action execution"},
		{Name: "request_id", Kind: String, Nullable: true, MaxLength: 255, Description: "Optional request identifier for tracking"},
	}}
)

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "healthy"})
}

func (s *Server) metadata(w http.ResponseWriter, _ *http.Request) {
	i := s.opts.Info
	null := func(v string) any {
		if v == "" {
			return nil
		}
		return v
	}
	desc := i.Description
	if desc == "" {
		desc = i.Name + " environment"
	}
	writeJSON(w, http.StatusOK, struct {
		Name             string `json:"name"`
		Description      string `json:"description"`
		Readme           any    `json:"readme_content"`
		Version          any    `json:"version"`
		Author           any    `json:"author"`
		DocumentationURL any    `json:"documentation_url"`
	}{i.Name, desc, null(i.Readme), null(i.Version), null(i.Author), null(i.DocumentationURL)})
}

func (s *Server) schema(w http.ResponseWriter, _ *http.Request) {
	i := s.opts.Info
	writeJSON(w, http.StatusOK, map[string]any{
		"action":      i.Action.JSONSchema(),
		"observation": i.Observation.JSONSchema(),
		"state":       i.State.JSONSchema(),
	})
}

// withEnv runs fn on a fresh Env, as OpenEnv's stateless HTTP routes do,
// holding a session slot meanwhile: an Env may hold real resources.
func (s *Server) withEnv(w http.ResponseWriter, r *http.Request, fn func(ctx context.Context, env Env) (any, error)) {
	if err := s.reserve(); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"detail": err.Error()})
		return
	}
	defer s.release()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	env, err := s.opts.Factory(ctx)
	if err != nil {
		s.opts.Logger.Warn("environment factory failed", "env", s.opts.Info.Name, "error", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"detail": factoryMessage(s.opts.Info.Name)})
		return
	}
	defer s.closeEnv(env)
	v, err := fn(ctx, env)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"detail": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) state(w http.ResponseWriter, r *http.Request) {
	s.withEnv(w, r, func(ctx context.Context, env Env) (any, error) { return env.State(ctx) })
}

// body reads and validates a request body against m; an empty body is {}.
func (s *Server) body(w http.ResponseWriter, r *http.Request, m *Model) (map[string]json.RawMessage, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxFrameBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"detail": "request body too large"})
		return nil, false
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"detail": "reading the request body failed"})
		return nil, false
	}
	if len(b) == 0 {
		b = []byte("{}")
	}
	if !json.Valid(b) {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": []FieldError{{
			Type: "json_invalid", Loc: []any{"body", 0}, Msg: "JSON decode error", Input: map[string]any{},
			Ctx: map[string]any{"error": "Expecting value"},
		}}})
		return nil, false
	}
	fields, errs := m.Validate(b)
	if errs != nil {
		for i := range errs {
			errs[i].Loc = append([]any{"body"}, errs[i].Loc...)
		}
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": errs})
		return nil, false
	}
	return fields, true
}

func (s *Server) reset(w http.ResponseWriter, r *http.Request) {
	args, ok := s.body(w, r, resetRequest)
	if !ok {
		return
	}
	s.withEnv(w, r, func(ctx context.Context, env Env) (any, error) { return env.Reset(ctx, args) })
}

func (s *Server) step(w http.ResponseWriter, r *http.Request) {
	req, ok := s.body(w, r, stepRequest)
	if !ok {
		return
	}
	action := req["action"]
	if _, errs := s.opts.Info.Action.Validate(action); errs != nil {
		// OpenEnv raises the action's own errors as the detail, unprefixed.
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": errs})
		return
	}
	var timeout float64
	if t, ok := req["timeout_s"]; ok {
		_ = json.Unmarshal(t, &timeout)
	}
	s.withEnv(w, r, func(ctx context.Context, env Env) (any, error) {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(timeout*float64(time.Second)))
			defer cancel()
		}
		return env.Step(ctx, action)
	})
}
