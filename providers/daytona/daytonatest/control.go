package daytonatest

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Sandbox states, as Daytona spells them.
const (
	statePendingBuild     = "pending_build"
	stateBuildingSnapshot = "building_snapshot"
	stateBuildFailed      = "build_failed"
	stateCreating         = "creating"
	stateStarting         = "starting"
	stateStarted          = "started"
	stateStopping         = "stopping"
	stateStopped          = "stopped"
	stateDestroying       = "destroying"
	stateDestroyed        = "destroyed"
)

// Sandbox is the API's view of a sandbox, as GET /sandbox/{id} answers.
type Sandbox struct {
	ID                 string            `json:"id"`
	OrganizationID     string            `json:"organizationId"`
	Name               string            `json:"name"`
	Snapshot           string            `json:"snapshot,omitempty"`
	User               string            `json:"user"`
	Env                map[string]string `json:"env"`
	Labels             map[string]string `json:"labels"`
	Public             bool              `json:"public"`
	NetworkBlockAll    bool              `json:"networkBlockAll"`
	NetworkAllowList   string            `json:"networkAllowList,omitempty"`
	DomainAllowList    string            `json:"domainAllowList,omitempty"`
	Target             string            `json:"target"`
	CPU                int               `json:"cpu"`
	GPU                int               `json:"gpu"`
	Memory             int               `json:"memory"`
	Disk               int               `json:"disk"`
	State              string            `json:"state"`
	ErrorReason        string            `json:"errorReason,omitempty"`
	AutoStopInterval   int               `json:"autoStopInterval"`
	AutoDeleteInterval int               `json:"autoDeleteInterval"`
	BuildInfo          *buildInfo        `json:"buildInfo,omitempty"`
	CreatedAt          string            `json:"createdAt"`
	UpdatedAt          string            `json:"updatedAt"`
	LastActivityAt     string            `json:"lastActivityAt"`
}

// sandbox is the server's record of one sandbox.
type sandbox struct {
	Sandbox

	dir        string // root of the sandbox's file system is dir/root
	buildLog   string
	lastActive time.Time
	stoppedAt  time.Time
	sessions   map[string]*session
}

type buildInfo struct {
	DockerfileContent string `json:"dockerfileContent"`
}

func (sb *sandbox) root() string { return filepath.Join(sb.dir, "root") }

// createRequest is the body of POST /sandbox.
type createRequest struct {
	Name               string            `json:"name"`
	Snapshot           string            `json:"snapshot"`
	BuildInfo          *buildInfo        `json:"buildInfo"`
	User               string            `json:"user"`
	Env                map[string]string `json:"env"`
	Labels             map[string]string `json:"labels"`
	Public             bool              `json:"public"`
	NetworkBlockAll    bool              `json:"networkBlockAll"`
	NetworkAllowList   string            `json:"networkAllowList"`
	DomainAllowList    string            `json:"domainAllowList"`
	Target             string            `json:"target"`
	CPU                *int              `json:"cpu"`
	Memory             *int              `json:"memory"`
	Disk               *int              `json:"disk"`
	AutoStopInterval   *int              `json:"autoStopInterval"`
	AutoDeleteInterval *int              `json:"autoDeleteInterval"`
}

func (s *Server) routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/sandbox", s.create)
	mux.HandleFunc("GET /api/sandbox", s.list)
	mux.HandleFunc("GET /api/sandbox/{id}", s.withSandbox(s.get))
	mux.HandleFunc("DELETE /api/sandbox/{id}", s.withSandbox(s.destroy))
	mux.HandleFunc("POST /api/sandbox/{id}/start", s.withSandbox(s.start))
	mux.HandleFunc("POST /api/sandbox/{id}/stop", s.withSandbox(s.stopSandbox))
	mux.HandleFunc("POST /api/sandbox/{id}/autostop/{min}", s.withSandbox(s.interval(func(sb *sandbox, m int) { sb.AutoStopInterval = m })))
	mux.HandleFunc("POST /api/sandbox/{id}/autodelete/{min}", s.withSandbox(s.interval(func(sb *sandbox, m int) { sb.AutoDeleteInterval = m })))
	mux.HandleFunc("PUT /api/sandbox/{id}/labels", s.withSandbox(s.labels))
	mux.HandleFunc("GET /api/sandbox/{id}/toolbox-proxy-url", s.withSandbox(func(w http.ResponseWriter, r *http.Request, sb *sandbox) {
		writeJSON(w, http.StatusOK, map[string]string{"url": s.srv.URL + "/toolbox"})
	}))
	mux.HandleFunc("GET /api/sandbox/{id}/build-logs", s.withSandbox(func(w http.ResponseWriter, r *http.Request, sb *sandbox) {
		if sb.BuildInfo == nil {
			writeError(w, http.StatusNotFound, fmt.Sprintf("Sandbox with ID or name %s has no build info", sb.ID))
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(sb.buildLog))
	}))
	s.toolboxRoutes(mux)
}

// find returns a sandbox by ID or name; s.mu is held.
func (s *Server) find(idOrName string) *sandbox {
	if sb, ok := s.sandboxes[idOrName]; ok {
		return sb
	}
	for _, sb := range s.sandboxes {
		if sb.Name == idOrName {
			return sb
		}
	}
	return nil
}

// withSandbox runs h with s.mu held and the sandbox of the path found.
func (s *Server) withSandbox(h func(http.ResponseWriter, *http.Request, *sandbox)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		sb := s.find(r.PathValue("id"))
		if sb == nil || sb.State == stateDestroyed {
			writeError(w, http.StatusNotFound, fmt.Sprintf("Sandbox with ID or name %s not found", r.PathValue("id")))
			return
		}
		h(w, r, sb)
	}
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if err := readJSON(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	o := s.opts
	cpu, mem, disk := deref(req.CPU, 1), deref(req.Memory, 1), deref(req.Disk, 3)
	switch {
	case req.Snapshot != "" && req.BuildInfo != nil:
		writeError(w, http.StatusBadRequest, "Cannot specify both snapshot and buildInfo")
		return
	case req.BuildInfo != nil && !strings.HasPrefix(req.BuildInfo.DockerfileContent, "FROM "):
		writeError(w, http.StatusBadRequest, "Invalid Dockerfile content")
		return
	case cpu < 1 || mem < 1 || disk < 1:
		writeError(w, http.StatusBadRequest, "cpu, memory and disk must be at least 1")
		return
	case cpu > o.MaxCPU:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("CPU request %d exceeds maximum allowed per sandbox (%d).\nContact support to raise the limit.", cpu, o.MaxCPU))
		return
	case mem > o.MaxMemoryGB:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Memory request %dGB exceeds maximum allowed per sandbox (%dGB).\nContact support to raise the limit.", mem, o.MaxMemoryGB))
		return
	case disk > o.MaxDiskGB:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Disk request %dGB exceeds maximum allowed per sandbox (%dGB).\nContact support to raise the limit.", disk, o.MaxDiskGB))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if msg := s.quotaExceeded(cpu, mem, disk); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	id := randomUUID()
	name := req.Name
	if name == "" {
		name = id
	}
	if s.find(name) != nil {
		writeError(w, http.StatusConflict, fmt.Sprintf("Sandbox with name %s already exists", name))
		return
	}
	now := time.Now()
	sb := &sandbox{Sandbox: Sandbox{
		ID: id, OrganizationID: "org-test", Name: name, Snapshot: req.Snapshot, User: req.User,
		Env: orEmpty(req.Env), Labels: orEmpty(req.Labels), Public: req.Public,
		NetworkBlockAll: req.NetworkBlockAll, NetworkAllowList: req.NetworkAllowList, DomainAllowList: req.DomainAllowList,
		Target: req.Target, CPU: cpu, Memory: mem, Disk: disk,
		AutoStopInterval: ptrOr(req.AutoStopInterval, 15), AutoDeleteInterval: ptrOr(req.AutoDeleteInterval, -1),
		BuildInfo: req.BuildInfo, CreatedAt: stamp(now)},
		dir: filepath.Join(s.opts.Dir, id), lastActive: now, sessions: map[string]*session{},
	}
	if sb.User == "" {
		sb.User = "root"
	}
	if sb.Target == "" {
		sb.Target = "us"
	}
	if sb.Snapshot == "" && sb.BuildInfo == nil {
		sb.Snapshot = "daytonaio/sandbox:latest"
	}
	if err := makeRoot(sb.root()); err != nil {
		_ = os.RemoveAll(sb.dir)
		writeError(w, http.StatusInternalServerError, "creating the sandbox file system: "+err.Error())
		return
	}
	steps := []string{stateCreating}
	final := stateStarted
	if sb.BuildInfo != nil {
		steps = []string{statePendingBuild, stateBuildingSnapshot, stateCreating}
		image := strings.TrimPrefix(sb.BuildInfo.DockerfileContent, "FROM ")
		sb.buildLog = fmt.Sprintf("#1 [internal] load build definition from Dockerfile\n#2 FROM %s\n#2 DONE 0.1s\n#3 exporting to image\n#3 DONE 0.2s\n", image)
		if len(s.buildFail) > 0 {
			sb.buildLog, s.buildFail = s.buildFail[0], s.buildFail[1:]
			steps, final = []string{statePendingBuild, stateBuildingSnapshot}, stateBuildFailed
		}
	}
	sb.State = steps[0]
	s.sandboxes[id] = sb
	s.advance(sb, steps[1:], final, func(sb *sandbox) {
		if sb.State == stateBuildFailed {
			sb.ErrorReason = "Failed to build the image: see the build logs"
		}
	})
	writeJSON(w, http.StatusOK, s.dto(sb))
}

// quotaExceeded returns Daytona's refusal when a new sandbox would pass an
// account quota; s.mu is held.
func (s *Server) quotaExceeded(cpu, mem, disk int) string {
	var usedCPU, usedMem, usedDisk int
	for _, sb := range s.sandboxes {
		if sb.State == stateDestroyed {
			continue
		}
		usedDisk += sb.Disk // stopped sandboxes hold their disk too
		if sb.State != stateStopped && sb.State != stateBuildFailed {
			usedCPU += sb.CPU
			usedMem += sb.Memory
		}
	}
	o := s.opts
	const archive = "\nArchive or delete unused sandboxes to free quota."
	switch {
	case o.CPUQuota > 0 && usedCPU+cpu > o.CPUQuota:
		return fmt.Sprintf("Total CPU limit exceeded. Maximum allowed: %d.%s", o.CPUQuota, archive)
	case o.MemoryQuotaGB > 0 && usedMem+mem > o.MemoryQuotaGB:
		return fmt.Sprintf("Total memory limit exceeded. Maximum allowed: %dGiB.%s", o.MemoryQuotaGB, archive)
	case o.DiskQuotaGB > 0 && usedDisk+disk > o.DiskQuotaGB:
		return fmt.Sprintf("Total disk limit exceeded. Maximum allowed: %dGiB.%s", o.DiskQuotaGB, archive)
	}
	return ""
}

// advance moves sb through steps to final, one StepDelay each, unless
// something else changes its state first; then runs done. s.mu is held.
func (s *Server) advance(sb *sandbox, steps []string, final string, done func(*sandbox)) {
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
			sb.UpdatedAt = stamp(time.Now())
			if next == final {
				if final == stateStopped {
					sb.stoppedAt = time.Now()
				}
				if final == stateDestroyed {
					delete(s.sandboxes, sb.ID)
					_ = os.RemoveAll(sb.dir)
				}
				if done != nil {
					done(sb)
				}
			}
			s.mu.Unlock()
		}
	}()
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	writeJSON(w, http.StatusOK, s.dto(sb))
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	var want map[string]string
	if l := r.URL.Query().Get("labels"); l != "" {
		if err := json.Unmarshal([]byte(l), &want); err != nil {
			writeError(w, http.StatusBadRequest, "Invalid labels JSON format")
			return
		}
	}
	offset, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
	s.mu.Lock()
	defer s.mu.Unlock()
	var match []*sandbox
	for _, sb := range s.sandboxes {
		if sb.State == stateDestroyed || sb.State == stateDestroying {
			continue
		}
		ok := true
		for k, v := range want {
			if sb.Labels[k] != v {
				ok = false
			}
		}
		if ok {
			match = append(match, sb)
		}
	}
	slices.SortFunc(match, func(a, b *sandbox) int { return strings.Compare(a.ID, b.ID) })
	items := []any{}
	var next *string
	for i := offset; i < len(match) && i < offset+s.opts.PageSize; i++ {
		items = append(items, s.dto(match[i]))
	}
	if offset+s.opts.PageSize < len(match) {
		c := strconv.Itoa(offset + s.opts.PageSize)
		next = &c
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "nextCursor": next})
}

func (s *Server) destroy(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	switch sb.State {
	case stateStarted:
		if s.opts.RefuseDeleteStarted {
			s.refuse(w, sb, "destroyed")
			return
		}
	case stateStopped, stateBuildFailed, statePendingBuild, stateDestroying, "error", "archived", "paused":
	default:
		s.refuse(w, sb, "destroyed")
		return
	}
	if sb.State != stateDestroying {
		s.killSessions(sb)
		sb.State = stateDestroying
		s.advance(sb, nil, stateDestroyed, nil)
	}
	writeJSON(w, http.StatusOK, s.dto(sb))
}

func (s *Server) refuse(w http.ResponseWriter, sb *sandbox, what string) {
	writeError(w, http.StatusBadRequest, fmt.Sprintf("Sandbox %s is not in a valid state to be %s. State: %s", sb.ID, what, sb.State))
}

func (s *Server) start(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	switch sb.State {
	case stateStarted, stateStarting:
	case stateStopped, "archived":
		sb.State = stateStarting
		sb.lastActive = time.Now()
		s.advance(sb, nil, stateStarted, nil)
	default:
		s.refuse(w, sb, "started")
		return
	}
	writeJSON(w, http.StatusOK, s.dto(sb))
}

func (s *Server) stopSandbox(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	switch sb.State {
	case stateStopped, stateStopping:
	case stateStarted:
		s.killSessions(sb)
		sb.State = stateStopping
		s.advance(sb, nil, stateStopped, nil)
	default:
		s.refuse(w, sb, "stopped")
		return
	}
	writeJSON(w, http.StatusOK, s.dto(sb))
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
		writeJSON(w, http.StatusOK, s.dto(sb))
	}
}

func (s *Server) labels(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Labels map[string]string `json:"labels"`
	}
	if err := readJSON(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	sb.Labels = orEmpty(req.Labels)
	writeJSON(w, http.StatusOK, map[string]any{"labels": sb.Labels})
}

// dto is the API's view of sb; s.mu is held.
func (s *Server) dto(sb *sandbox) Sandbox {
	out := sb.Sandbox
	out.Env = maps.Clone(sb.Env)
	out.Labels = maps.Clone(sb.Labels)
	out.LastActivityAt = stamp(sb.lastActive)
	if out.UpdatedAt == "" {
		out.UpdatedAt = out.CreatedAt
	}
	return out
}

// reaper stops sandboxes idle past their auto-stop interval and destroys
// those stopped past their auto-delete interval.
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
				case sb.State == stateStarted && sb.AutoStopInterval > 0 &&
					now.Sub(sb.lastActive) >= time.Duration(sb.AutoStopInterval)*s.opts.Minute:
					s.killSessions(sb)
					sb.State, sb.stoppedAt = stateStopped, now
				case sb.State == stateStopped && sb.AutoDeleteInterval >= 0 &&
					now.Sub(sb.stoppedAt) >= time.Duration(sb.AutoDeleteInterval)*s.opts.Minute:
					sb.State = stateDestroying
					s.advance(sb, nil, stateDestroyed, nil)
				}
			}
			s.mu.Unlock()
		}
	}
}

// deref is *p, or d when the field was left out or zero.
func deref(p *int, d int) int {
	if p == nil || *p == 0 {
		return d
	}
	return *p
}

// ptrOr is *p, or d when the field was left out (zero is meaningful).
func ptrOr(p *int, d int) int {
	if p == nil {
		return d
	}
	return *p
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func randomUUID() string {
	h := randomHex(16)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
