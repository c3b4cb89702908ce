package daytonatest

import (
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"syscall"
	"time"
)

func (s *Server) lifecycleRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/sandbox/{id}/start", s.withSandbox(s.start))
	mux.HandleFunc("POST /api/sandbox/{id}/stop", s.withSandbox(s.stopSandbox))
	mux.HandleFunc("POST /api/sandbox/{id}/pause", s.withSandbox(s.pause))
	mux.HandleFunc("POST /api/sandbox/{id}/fork", s.withSandbox(s.fork))
	// The SDKs' refreshActivity: the auto-stop clock starts again (preview
	// traffic does not move it; toolbox calls do).
	mux.HandleFunc("POST /api/sandbox/{id}/last-activity", s.withSandbox(func(w http.ResponseWriter, r *http.Request, sb *sandbox) {
		sb.lastActive = time.Now()
		w.WriteHeader(http.StatusCreated)
	}))
	mux.HandleFunc("POST /api/sandbox/{id}/autostop/{min}", s.withSandbox(s.interval(func(sb *sandbox, m int) { sb.AutoStopInterval = m })))
	mux.HandleFunc("POST /api/sandbox/{id}/autoarchive/{min}", s.withSandbox(s.interval(func(sb *sandbox, m int) { sb.AutoArchiveInterval = m })))
	mux.HandleFunc("POST /api/sandbox/{id}/autodelete/{min}", s.withSandbox(s.interval(func(sb *sandbox, m int) { sb.AutoDeleteInterval = m })))
	// The TTL is a deadline counted from now, whatever the sandbox's state
	// (0 removes it): when it passes the sandbox is destroyed.
	mux.HandleFunc("POST /api/sandbox/{id}/ttl/{min}", s.withSandbox(s.interval(func(sb *sandbox, m int) {
		var at time.Time
		if m > 0 {
			at = time.Now().Add(time.Duration(m) * s.opts.Minute)
		}
		sb.eb.SetDeadline(at)
	})))
}

func (s *Server) start(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	switch sb.State {
	case stateStarted, stateStarting, stateResuming:
	case stateStopped, stateArchived:
		sb.State, sb.DesiredState = stateStarting, stateStarted
		sb.lastActive = time.Now()
		s.advance(sb, nil, stateStarted, nil)
	case statePaused:
		// Memory was kept: the processes go on where they stopped.
		sb.State, sb.DesiredState = stateResuming, stateStarted
		sb.lastActive = time.Now()
		s.advance(sb, nil, stateStarted, func(sb *sandbox) { sb.eb.Signal(syscall.SIGCONT) })
	default:
		s.refuse(w, sb, "started")
		return
	}
	writeJSON(w, http.StatusOK, s.dto(sb))
}

func (s *Server) stopSandbox(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	switch sb.State {
	case stateStopped, stateStopping:
	case stateStarted, statePaused:
		s.stopLocked(sb)
		sb.State, sb.DesiredState = stateStopping, stateStopped
		s.advance(sb, nil, stateStopped, nil)
	default:
		s.refuse(w, sb, "stopped")
		return
	}
	writeJSON(w, http.StatusOK, s.dto(sb))
}

// pause stops every process of a VM-class sandbox where it is (SIGSTOP):
// its memory is kept, and start resumes it. Containers cannot pause.
func (s *Server) pause(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	if !s.vmStarted(w, sb, "Pausing", "pause") {
		return
	}
	sb.eb.Signal(syscall.SIGSTOP)
	sb.State, sb.DesiredState = statePausing, statePaused
	s.advance(sb, nil, statePaused, nil)
	writeJSON(w, http.StatusOK, s.dto(sb))
}

// fork makes a new sandbox with a copy of a started VM-class sandbox's
// file system (its processes are not copied). The source is forking until
// the copy is made.
func (s *Server) fork(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Name string `json:"name"`
	}
	if r.ContentLength != 0 {
		if err := readJSON(r, &req); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	if !s.vmStarted(w, sb, "Forking", "fork") {
		return
	}
	switch {
	case req.Name != "" && s.find(req.Name) != nil:
		writeError(w, http.StatusConflict, fmt.Sprintf("Sandbox with name %s already exists", req.Name))
		return
	}
	if msg := s.quotaExceeded(sb.CPU, sb.Memory, sb.Disk); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	v := sb.Sandbox
	v.Name, v.State, v.ErrorReason, v.BuildInfo = req.Name, stateCreating, "", nil
	v.Env, v.Labels = orEmpty(maps.Clone(sb.Env)), orEmpty(maps.Clone(sb.Labels))
	child := s.newRecord(v, time.Now())
	child.parent = sb.ID
	if err := s.makeTree(child, 0, sb.eb.Root()); err != nil {
		writeError(w, http.StatusInternalServerError, "forking the file system: "+err.Error())
		return
	}
	s.sandboxes[child.ID] = child
	sb.State = stateForking
	s.advance(sb, nil, stateStarted, nil)
	s.advance(child, nil, stateStarted, nil)
	writeJSON(w, http.StatusOK, s.dto(child))
}

// vmStarted answers as Daytona does when sb cannot be paused or forked:
// 422 for a class that cannot, 400 for a sandbox that is not started.
func (s *Server) vmStarted(w http.ResponseWriter, sb *sandbox, doing, do string) bool {
	switch {
	case sb.SandboxClass != classLinuxVM && sb.SandboxClass != classWindows:
		writeError(w, http.StatusUnprocessableEntity, doing+" is not supported for this sandbox")
		return false
	case sb.State != stateStarted:
		writeError(w, http.StatusBadRequest, "Sandbox must be in started state to "+do)
		return false
	}
	return true
}

func (s *Server) interval(set func(*sandbox, int)) func(http.ResponseWriter, *http.Request, *sandbox) {
	return func(w http.ResponseWriter, r *http.Request, sb *sandbox) {
		m, err := strconv.Atoi(r.PathValue("min"))
		if err != nil {
			writeError(w, http.StatusBadRequest, "interval must be an integer number of minutes")
			return
		}
		set(sb, m)
		sb.lastActive = time.Now()
		// These routes have no status of their own: NestJS answers a POST
		// with 201.
		writeJSON(w, http.StatusCreated, s.dto(sb))
	}
}

// advance moves sb through steps to final, one StepDelay each, unless
// something else changes its state first; then runs done. s.mu is held.
func (s *Server) advance(sb *sandbox, steps []string, final string, done func(*sandbox)) {
	if s.closed {
		return
	}
	expect := sb.State
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for _, next := range append(steps, final) {
			select {
			case <-s.stop:
				return
			case <-time.After(s.opts.StepDelay):
			}
			s.mu.Lock()
			if sb.State != expect { // deleted or changed meanwhile
				s.mu.Unlock()
				return
			}
			sb.State, expect = next, next
			sb.history = append(sb.history, next)
			sb.UpdatedAt = stamp(time.Now())
			if next == final {
				if final == stateStopped {
					sb.stoppedAt = time.Now()
				}
				if final == stateDestroyed {
					delete(s.sandboxes, sb.ID)
				}
				if done != nil {
					done(sb)
				}
			}
			s.mu.Unlock()
		}
	}()
}

// reaper stops sandboxes idle past their auto-stop interval and destroys
// those stopped past their auto-delete interval (the engine's deadline is
// the TTL).
func (s *Server) reaper() {
	defer s.wg.Done()
	tick := min(max(s.opts.Minute/20, 10*time.Millisecond), 5*time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.mu.Lock()
			for _, sb := range s.sandboxes {
				switch {
				case sb.State == stateDestroying || sb.State == stateDestroyed:
				case sb.State == stateStarted && sb.AutoStopInterval > 0 &&
					now.Sub(sb.lastActive) >= time.Duration(sb.AutoStopInterval)*s.opts.Minute:
					s.stopLocked(sb)
					sb.State, sb.stoppedAt = stateStopped, now
				case sb.State == stateStopped && sb.AutoDeleteInterval >= 0 &&
					now.Sub(sb.stoppedAt) >= time.Duration(sb.AutoDeleteInterval)*s.opts.Minute:
					s.destroyLocked(sb)
				}
			}
			s.mu.Unlock()
		}
	}
}
