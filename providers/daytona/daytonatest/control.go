package daytonatest

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth/internal/testing/fakeengine"
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
	statePausing          = "pausing"
	statePaused           = "paused"
	stateResuming         = "resuming"
	stateForking          = "forking"
	stateArchived         = "archived"
	stateError            = "error"
	stateDestroying       = "destroying"
	stateDestroyed        = "destroyed"
)

// Sandbox classes. Only VM classes pause and fork.
const (
	classContainer = "container"
	classLinuxVM   = "linux-vm"
	classWindows   = "windows"
)

// Sandbox is the API's view of a sandbox, as GET /sandbox/{id} answers
// (the generated clients' Sandbox model).
type Sandbox struct {
	ID                  string            `json:"id"`
	OrganizationID      string            `json:"organizationId"`
	Name                string            `json:"name"`
	Snapshot            string            `json:"snapshot,omitempty"`
	User                string            `json:"user"`
	Env                 map[string]string `json:"env"`
	Labels              map[string]string `json:"labels"`
	Public              bool              `json:"public"`
	NetworkBlockAll     bool              `json:"networkBlockAll"`
	NetworkAllowList    string            `json:"networkAllowList,omitempty"`
	DomainAllowList     string            `json:"domainAllowList,omitempty"`
	Target              string            `json:"target"`
	CPU                 int               `json:"cpu"`
	GPU                 int               `json:"gpu"`
	Memory              int               `json:"memory"`
	Disk                int               `json:"disk"`
	State               string            `json:"state"`
	DesiredState        string            `json:"desiredState"`
	ErrorReason         string            `json:"errorReason,omitempty"`
	Recoverable         bool              `json:"recoverable"`
	BackupState         string            `json:"backupState"`
	AutoStopInterval    int               `json:"autoStopInterval"`
	AutoArchiveInterval int               `json:"autoArchiveInterval"`
	AutoDeleteInterval  int               `json:"autoDeleteInterval"`
	AutoDestroyAt       string            `json:"autoDestroyAt,omitempty"`
	BuildInfo           *BuildInfo        `json:"buildInfo,omitempty"`
	CreatedAt           string            `json:"createdAt"`
	UpdatedAt           string            `json:"updatedAt"`
	LastActivityAt      string            `json:"lastActivityAt"`
	SandboxClass        string            `json:"sandboxClass"`
	DaemonVersion       string            `json:"daemonVersion"`
	ToolboxProxyURL     string            `json:"toolboxProxyUrl"`
}

// BuildInfo is how a sandbox's image was built.
type BuildInfo struct {
	DockerfileContent string `json:"dockerfileContent"`
	CreatedAt         string `json:"createdAt"`
	UpdatedAt         string `json:"updatedAt"`
	SnapshotRef       string `json:"snapshotRef"`
}

// daemonVersion is the toolbox version the fake reports.
const daemonVersion = "v0.218.0"

// sandbox is the server's record of one sandbox; its file system,
// processes and TTL are the engine's.
type sandbox struct {
	Sandbox

	eb         *fakeengine.Sandbox
	buildLog   string
	lastActive time.Time
	stoppedAt  time.Time
	parent     string   // the sandbox this one was forked from
	authToken  string   // the preview token
	history    []string // its states, as create and advance set them
	sessions   map[string]*session
}

// createRequest is the body of POST /sandbox (CreateSandbox).
type createRequest struct {
	Name      string `json:"name"`
	Snapshot  string `json:"snapshot"`
	BuildInfo *struct {
		DockerfileContent string   `json:"dockerfileContent"`
		ContextHashes     []string `json:"contextHashes"`
	} `json:"buildInfo"`
	User               string            `json:"user"`
	Env                map[string]string `json:"env"`
	Labels             map[string]string `json:"labels"`
	Public             bool              `json:"public"`
	NetworkBlockAll    bool              `json:"networkBlockAll"`
	NetworkAllowList   string            `json:"networkAllowList"`
	DomainAllowList    string            `json:"domainAllowList"`
	Target             string            `json:"target"`
	CPU                *int              `json:"cpu"`
	GPU                *int              `json:"gpu"`
	Memory             *int              `json:"memory"`
	Disk               *int              `json:"disk"`
	AutoStopInterval   *int              `json:"autoStopInterval"`
	AutoPauseInterval  *int              `json:"autoPauseInterval"`
	AutoArchive        *int              `json:"autoArchiveInterval"`
	AutoDeleteInterval *int              `json:"autoDeleteInterval"`
	TTLMinutes         *int              `json:"ttlMinutes"`
}

func (s *Server) routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/sandbox", s.create)
	mux.HandleFunc("GET /api/sandbox", s.list)
	mux.HandleFunc("GET /api/sandbox/{id}", s.withSandbox(s.get))
	mux.HandleFunc("DELETE /api/sandbox/{id}", s.withSandbox(s.destroy))
	mux.HandleFunc("PUT /api/sandbox/{id}/labels", s.withSandbox(s.labels))
	mux.HandleFunc("GET /api/sandbox/{id}/toolbox-proxy-url", s.withSandbox(func(w http.ResponseWriter, r *http.Request, sb *sandbox) {
		writeJSON(w, http.StatusOK, map[string]string{"url": s.toolboxURL()})
	}))
	mux.HandleFunc("GET /api/sandbox/{id}/build-logs", s.withSandbox(func(w http.ResponseWriter, r *http.Request, sb *sandbox) {
		if sb.BuildInfo == nil {
			writeError(w, http.StatusNotFound, fmt.Sprintf("Sandbox with ID or name %s has no build info", sb.ID))
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(sb.buildLog))
	}))
	s.lifecycleRoutes(mux)
	s.previewRoutes(mux)
	s.toolboxRoutes(mux)
}

// toolboxURL is the toolbox proxy's base; a sandbox's toolbox is under
// /<id>.
func (s *Server) toolboxURL() string { return s.srv.URL + "/toolbox" }

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
	cpu, mem, disk := deref(req.CPU, 1), deref(req.Memory, 1), deref(req.Disk, 3)
	if msg := s.refusal(&req, cpu, mem, disk); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if msg := s.quotaExceeded(cpu, mem, disk); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	name := req.Name
	if name != "" && s.find(name) != nil {
		writeError(w, http.StatusConflict, fmt.Sprintf("Sandbox with name %s already exists", name))
		return
	}
	now := time.Now()
	sb := s.newRecord(Sandbox{
		Name: name, Snapshot: req.Snapshot, User: req.User,
		Env: orEmpty(req.Env), Labels: orEmpty(req.Labels), Public: req.Public,
		NetworkBlockAll: req.NetworkBlockAll, NetworkAllowList: req.NetworkAllowList, DomainAllowList: req.DomainAllowList,
		Target: req.Target, CPU: cpu, Memory: mem, Disk: disk,
		AutoStopInterval: ptrOr(req.AutoStopInterval, 15), AutoArchiveInterval: ptrOr(req.AutoArchive, 10080),
		AutoDeleteInterval: ptrOr(req.AutoDeleteInterval, -1), SandboxClass: s.opts.SnapshotClasses[req.Snapshot],
	}, now)
	if sb.Snapshot == "" && req.BuildInfo == nil {
		sb.Snapshot = "daytonaio/sandbox:latest"
	}
	ttl := time.Duration(ptrOr(req.TTLMinutes, 0)) * s.opts.Minute
	if err := s.makeTree(sb, ttl, ""); err != nil {
		writeError(w, http.StatusInternalServerError, "creating the sandbox file system: "+err.Error())
		return
	}
	steps := []string{stateCreating}
	final := stateStarted
	if b := req.BuildInfo; b != nil {
		sb.BuildInfo = &BuildInfo{DockerfileContent: b.DockerfileContent, CreatedAt: stamp(now), UpdatedAt: stamp(now),
			SnapshotRef: "daytona-build-" + randomHex(8)}
		steps = []string{statePendingBuild, stateBuildingSnapshot, stateCreating}
		image, _, _ := strings.Cut(strings.TrimPrefix(b.DockerfileContent, "FROM "), "\n")
		sb.buildLog = fmt.Sprintf("#1 [internal] load build definition from Dockerfile\n#2 FROM %s\n#2 DONE 0.1s\n#3 exporting to image\n#3 DONE 0.2s\n", strings.TrimSpace(image))
		if len(s.buildFail) > 0 {
			sb.buildLog, s.buildFail = s.buildFail[0], s.buildFail[1:]
			steps, final = []string{statePendingBuild, stateBuildingSnapshot}, stateBuildFailed
		}
	}
	sb.State = steps[0]
	sb.history = []string{sb.State}
	s.sandboxes[sb.ID] = sb
	s.advance(sb, steps[1:], final, func(sb *sandbox) {
		if sb.State == stateBuildFailed {
			sb.ErrorReason = "Failed to build the image: see the build logs"
		}
	})
	writeJSON(w, http.StatusOK, s.dto(sb))
}

// refusal is Daytona's answer to a create it refuses before looking at
// the account, "" when it takes it.
func (s *Server) refusal(req *createRequest, cpu, mem, disk int) string {
	o := s.opts
	const contact = "exceeds maximum allowed per sandbox (%d%s).\nContact support to raise the limit."
	switch {
	case req.Snapshot != "" && req.BuildInfo != nil:
		return "Cannot specify both snapshot and buildInfo"
	case req.BuildInfo != nil && !strings.HasPrefix(req.BuildInfo.DockerfileContent, "FROM "):
		return "Invalid Dockerfile content"
	case cpu < 1 || mem < 1 || disk < 1:
		return "cpu, memory and disk must be at least 1"
	case cpu > o.MaxCPU:
		return fmt.Sprintf("CPU request %d "+contact, cpu, o.MaxCPU, "")
	case mem > o.MaxMemoryGB:
		return fmt.Sprintf("Memory request %dGB "+contact, mem, o.MaxMemoryGB, "GB")
	case disk > o.MaxDiskGB:
		return fmt.Sprintf("Disk request %dGB "+contact, disk, o.MaxDiskGB, "GB")
	case req.TTLMinutes != nil && *req.TTLMinutes < 0:
		return "ttlMinutes must be a non-negative integer"
	}
	return ""
}

// newRecord fills the server's defaults into a new sandbox's view; s.mu
// is held.
func (s *Server) newRecord(v Sandbox, now time.Time) *sandbox {
	v.ID = randomUUID()
	if v.Name == "" {
		v.Name = v.ID
	}
	v.OrganizationID = "org-test"
	v.DesiredState = stateStarted
	v.BackupState = "None"
	v.CreatedAt = stamp(now)
	v.DaemonVersion = daemonVersion
	if v.User == "" {
		v.User = "root"
	}
	if v.Target == "" {
		v.Target = "us"
	}
	if v.SandboxClass == "" {
		v.SandboxClass = classContainer
	}
	return &sandbox{Sandbox: v, lastActive: now, sessions: map[string]*session{}}
}

// makeTree makes sb's file system in the engine, a copy of seed's when
// seed is set, with the environment its commands see and the TTL.
func (s *Server) makeTree(sb *sandbox, ttl time.Duration, seed string) error {
	env := map[string]string{"HOME": "/root", "USER": "root", "HOSTNAME": "daytona-sandbox"}
	maps.Copy(env, sb.Env)
	eb, err := s.eng.Create(fakeengine.Spec{ID: sb.ID, Env: env, TTL: ttl, Layout: layout(), Seed: seed, Value: sb})
	sb.eb = eb
	return err
}

// quotaExceeded returns Daytona's refusal when a new sandbox would pass an
// account quota; s.mu is held.
func (s *Server) quotaExceeded(cpu, mem, disk int) string {
	var usedCPU, usedMem, usedDisk int
	for _, sb := range s.sandboxes {
		if sb.State == stateDestroyed || sb.State == stateArchived {
			continue
		}
		usedDisk += sb.Disk // stopped and paused sandboxes hold their disk too
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

func (s *Server) get(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	writeJSON(w, http.StatusOK, s.dto(sb))
}

// list answers GET /sandbox: one page of the sandboxes that carry every
// label of the labels query (a JSON object), newest first by ID order,
// destroyed ones left out.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var want map[string]string
	if l := q.Get("labels"); l != "" {
		if err := json.Unmarshal([]byte(l), &want); err != nil {
			writeError(w, http.StatusBadRequest, "Invalid labels JSON format")
			return
		}
	}
	states := q["states"]
	offset, _ := strconv.Atoi(q.Get("cursor"))
	limit := s.opts.PageSize
	if l, err := strconv.Atoi(q.Get("limit")); err == nil && l > 0 && l < limit {
		limit = l
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var match []*sandbox
	for _, sb := range s.sandboxes {
		if sb.State == stateDestroyed || (len(states) > 0 && !slices.Contains(states, sb.State)) {
			continue
		}
		ok := true
		for k, v := range want {
			if have, found := sb.Labels[k]; !found || have != v {
				ok = false
			}
		}
		if ok {
			match = append(match, sb)
		}
	}
	slices.SortFunc(match, func(a, b *sandbox) int { return strings.Compare(a.ID, b.ID) })
	items := []map[string]any{}
	var next *string
	for i := offset; i < len(match) && i < offset+limit; i++ {
		items = append(items, s.item(match[i]))
	}
	if offset+limit < len(match) {
		c := strconv.Itoa(offset + limit)
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
	case stateStopped, stateBuildFailed, statePendingBuild, stateDestroying, stateError, stateArchived, statePaused:
	default:
		s.refuse(w, sb, "destroyed")
		return
	}
	for _, other := range s.sandboxes {
		if other.parent == sb.ID && other.State != stateDestroyed && other.State != stateDestroying {
			writeError(w, http.StatusBadRequest, "Cannot delete sandbox which has active fork children. The forks must be deleted first.")
			return
		}
	}
	s.destroyLocked(sb)
	writeJSON(w, http.StatusOK, s.dto(sb))
}

// destroyLocked starts destroying sb: its processes and files go at once;
// s.mu is held.
func (s *Server) destroyLocked(sb *sandbox) {
	if sb.State == stateDestroying || sb.State == stateDestroyed {
		return
	}
	s.killSessions(sb)
	_ = sb.eb.End(fakeengine.Deleted)
	sb.State, sb.DesiredState = stateDestroying, stateDestroyed
	s.advance(sb, nil, stateDestroyed, nil)
}

func (s *Server) refuse(w http.ResponseWriter, sb *sandbox, what string) {
	writeError(w, http.StatusBadRequest, fmt.Sprintf("Sandbox %s is not in a valid state to be %s. State: %s", sb.ID, what, sb.State))
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
	if at := sb.eb.Deadline(); !at.IsZero() {
		out.AutoDestroyAt = stamp(at)
	}
	out.ToolboxProxyURL = s.toolboxURL()
	if b := sb.BuildInfo; b != nil {
		c := *b
		out.BuildInfo = &c
	}
	return out
}

// item is sb as a list shows it (SandboxListItem): the Sandbox without
// its environment, build and backup; s.mu is held.
func (s *Server) item(sb *sandbox) map[string]any {
	var m map[string]any
	b, _ := json.Marshal(s.dto(sb))
	_ = json.Unmarshal(b, &m)
	for _, k := range []string{"env", "buildInfo", "recoverable", "backupState"} {
		delete(m, k)
	}
	return m
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
