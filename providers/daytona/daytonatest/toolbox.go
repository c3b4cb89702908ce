package daytonatest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/berth-sh/berth/internal/syncbuf"
	"github.com/berth-sh/berth/internal/testing/fakeengine"
)

func (s *Server) toolboxRoutes(mux *http.ServeMux) {
	const p = "/toolbox/{id}"
	mux.HandleFunc("POST "+p+"/process/session", s.withStarted(s.createSession))
	mux.HandleFunc("DELETE "+p+"/process/session/{sid}", s.withStarted(s.deleteSession))
	mux.HandleFunc("POST "+p+"/process/session/{sid}/exec", s.withStarted(s.sessionExec))
	mux.HandleFunc("GET "+p+"/process/session/{sid}/command/{cid}", s.withCommand(s.getCommand))
	mux.HandleFunc("GET "+p+"/process/session/{sid}/command/{cid}/logs", s.withCommand(s.commandLogs))
	mux.HandleFunc("POST "+p+"/process/session/{sid}/command/{cid}/input", s.withCommand(s.commandInput))
	mux.HandleFunc("POST "+p+"/process/execute", s.withStarted(s.execute))
	s.fileRoutes(mux, p)
}

// withStarted finds the sandbox of a toolbox request, which must be
// started, notes the activity, and runs h without s.mu held.
func (s *Server) withStarted(h func(http.ResponseWriter, *http.Request, *sandbox)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		sb := s.find(r.PathValue("id"))
		switch {
		case sb == nil || sb.State == stateDestroyed || sb.State == stateDestroying:
			s.mu.Unlock()
			writeError(w, http.StatusNotFound, "sandbox not found")
			return
		case sb.State != stateStarted:
			state := sb.State
			s.mu.Unlock()
			writeError(w, http.StatusBadRequest, "sandbox is not running (state "+state+")")
			return
		}
		sb.lastActive = time.Now()
		s.mu.Unlock()
		h(w, r, sb)
	}
}

// withCommand also finds the session and command of the path.
func (s *Server) withCommand(h func(http.ResponseWriter, *http.Request, *command)) http.HandlerFunc {
	return s.withStarted(func(w http.ResponseWriter, r *http.Request, sb *sandbox) {
		s.mu.Lock()
		sess := sb.sessions[r.PathValue("sid")]
		var c *command
		if sess != nil {
			c = sess.cmds[r.PathValue("cid")]
		}
		s.mu.Unlock()
		switch {
		case sess == nil:
			writeError(w, http.StatusNotFound, "session not found")
		case c == nil:
			writeError(w, http.StatusNotFound, "command not found")
		default:
			h(w, r, c)
		}
	})
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		SessionID string `json:"sessionId"`
	}
	if err := readJSON(r, &req); err != nil || req.SessionID == "" {
		writeError(w, http.StatusBadRequest, "sessionId is required")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := sb.sessions[req.SessionID]; ok {
		writeError(w, http.StatusConflict, "session already exists")
		return
	}
	sb.sessions[req.SessionID] = &session{id: req.SessionID, cmds: map[string]*command{}}
	w.WriteHeader(http.StatusCreated)
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := sb.sessions[r.PathValue("sid")]
	if !ok {
		writeError(w, http.StatusNotFound, "session not found")
		return
	}
	for _, c := range sess.cmds {
		c.kill()
	}
	delete(sb.sessions, sess.id)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) sessionExec(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Command           string `json:"command"`
		RunAsync          bool   `json:"runAsync"`
		Async             bool   `json:"async"`
		SuppressInputEcho bool   `json:"suppressInputEcho"`
	}
	if err := readJSON(r, &req); err != nil || strings.TrimSpace(req.Command) == "" {
		writeError(w, http.StatusBadRequest, "command is required")
		return
	}
	s.mu.Lock()
	sess, ok := sb.sessions[r.PathValue("sid")]
	if !ok {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "session not found")
		return
	}
	c := &command{id: randomUUID(), text: req.Command, suppressEcho: req.SuppressInputEcho, log: newLogBuf()}
	if err := s.startCommand(sb, c); err != nil {
		s.mu.Unlock()
		writeError(w, http.StatusBadRequest, "failed to start the command: "+err.Error())
		return
	}
	sess.cmds[c.id] = c
	s.mu.Unlock()
	if req.RunAsync || req.Async {
		writeJSON(w, http.StatusAccepted, map[string]any{"cmdId": c.id, "output": nil, "stdout": nil, "stderr": nil, "exitCode": nil})
		return
	}
	for {
		data, exit, ended, ch := c.log.since(0)
		if ended {
			writeError(w, http.StatusBadRequest, "session cancelled")
			return
		}
		if exit != nil {
			out := map[string]any{"cmdId": c.id, "exitCode": *exit, "stdout": nil, "stderr": nil}
			v := sdkVersion(r.Header)
			switch {
			case combinedOutput(v, r.Header):
				out["output"] = string(stripMarks(data))
			case skipServerDemux(v):
				out["output"] = string(data)
			default:
				stdout, stderr := demux(data)
				out["output"], out["stdout"], out["stderr"] = string(data), string(stdout), string(stderr)
			}
			writeJSON(w, http.StatusOK, out)
			return
		}
		select {
		case <-ch:
		case <-r.Context().Done():
			return
		}
	}
}

func (s *Server) getCommand(w http.ResponseWriter, r *http.Request, c *command) {
	out := map[string]any{"id": c.id, "command": c.text}
	if exit := c.log.exitCode(); exit != nil {
		out["exitCode"] = *exit
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) commandInput(w http.ResponseWriter, r *http.Request, c *command) {
	var req struct {
		Data string `json:"data"`
	}
	if err := readJSON(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if exit := c.log.exitCode(); exit != nil {
		writeCodedError(w, http.StatusGone, "COMMAND_ALREADY_COMPLETED", fmt.Sprintf("command has already completed with exit code %d", *exit))
		return
	}
	if err := c.input(req.Data); err != nil {
		writeCodedError(w, http.StatusGone, "COMMAND_ALREADY_COMPLETED", "failed to write to input pipe: "+err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// commandLogs answers the whole log, or follows it over a WebSocket, in
// the form the daemon picks from the client's SDK version
// (X-Daytona-SDK-Version): SDKs before 0.27, and clients that name no
// version and do not ask for X-Daytona-Split-Output, get stdout and stderr
// merged with the markers stripped; newer SDKs and clients that ask for the
// split get the marked log, whole logs as JSON {output, stdout, stderr}
// (plain marked text for SDKs before 0.163, which split it themselves).
func (s *Server) commandLogs(w http.ResponseWriter, r *http.Request, c *command) {
	v := sdkVersion(r.Header)
	combined := combinedOutput(v, r.Header)
	if r.Header.Get("Upgrade") == "websocket" {
		s.followLogs(w, r, c, !combined)
		return
	}
	data, _, _, _ := c.log.since(0)
	switch {
	case combined:
		data = stripMarks(data)
	case !skipServerDemux(v):
		stdout, stderr := demux(data)
		writeJSON(w, http.StatusOK, map[string]string{"output": string(data), "stdout": string(stdout), "stderr": string(stderr)})
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(data)
}

// followLogs streams the log from its start until the command has ended
// (or its session is gone), then closes normally, as the daemon does. A
// DropStreams fault cuts the connection without a close frame instead.
func (s *Server) followLogs(w http.ResponseWriter, r *http.Request, c *command, split bool) {
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer conn.CloseNow()
	drop := -1
	s.mu.Lock()
	if len(s.drops) > 0 {
		drop, s.drops = s.drops[0], s.drops[1:]
	}
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() { // end the stream with the server
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	sent := 0
	for {
		data, exit, ended, changed := c.log.since(sent)
		for len(data) > 0 {
			n := chunkEnd(data, 32<<10)
			if drop >= 0 && sent+n > drop {
				if k := drop - sent; k > 0 {
					_ = conn.Write(ctx, websocket.MessageBinary, data[:k])
				}
				s.mu.Lock()
				s.dropped++
				s.mu.Unlock()
				return // the deferred CloseNow sends no close frame
			}
			out := data[:n]
			if !split {
				out = stripMarks(out)
			}
			if err := conn.Write(ctx, websocket.MessageBinary, out); err != nil {
				return
			}
			sent += n
			data = data[n:]
		}
		if exit != nil || ended {
			_ = conn.Close(websocket.StatusNormalClosure, "")
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// chunkEnd picks the end of the next message: at most max bytes, cut after
// a newline when there is one, so that no marker is split.
func chunkEnd(data []byte, max int) int {
	if len(data) <= max {
		return len(data)
	}
	if i := bytes.LastIndexByte(data[:max], '\n'); i >= 0 {
		return i + 1
	}
	return max
}

// execute runs a command to completion, stdout and stderr combined, as
// POST /process/execute does.
func (s *Server) execute(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Command string            `json:"command"`
		Cwd     *string           `json:"cwd"`
		Envs    map[string]string `json:"envs"`
		Timeout *uint32           `json:"timeout"`
	}
	if err := readJSON(r, &req); err != nil || strings.TrimSpace(req.Command) == "" {
		writeError(w, http.StatusBadRequest, "command cannot be empty or whitespace-only")
		return
	}
	if why := Available(); why != "" {
		writeError(w, http.StatusBadRequest, why)
		return
	}
	var out syncbuf.Buffer
	cmd := fakeengine.Command{Args: []string{"sh"}, Env: req.Envs, Stdin: true, Stdout: &out, Stderr: &out}
	if req.Cwd != nil {
		cmd.Dir = *req.Cwd
	}
	if req.Timeout != nil && *req.Timeout > 0 {
		cmd.Timeout = time.Duration(*req.Timeout) * time.Second
	}
	ep, err := sb.eb.Exec(r.Context(), cmd)
	if err != nil {
		writeJSON(w, http.StatusOK, map[string]any{"exitCode": -1, "result": err.Error()})
		return
	}
	// The script is sh's stdin; a timeout kills sh, which ends this write.
	_, _ = io.WriteString(ep.Stdin(), req.Command)
	_ = ep.Stdin().Close()
	ex := ep.Exit()
	if ex.TimedOut {
		writeError(w, http.StatusRequestTimeout, "command execution timeout")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"exitCode": ex.Code, "result": out.String()})
}
