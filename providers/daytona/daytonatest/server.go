package daytonatest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-sh/berth/internal/testing/fakeengine"
)

// Options configure a Server. Zero values take Daytona's defaults.
type Options struct {
	// APIKey is the bearer token the server accepts; "" makes a random one.
	APIKey string
	// Dir holds the sandboxes' file systems; "" makes a temporary directory
	// that Close removes.
	Dir string
	// Minute is the length of an auto-stop / auto-delete minute; zero means
	// a real minute. Tests shorten it to see sandboxes expire.
	Minute time.Duration
	// StepDelay is how long a sandbox stays in each transitional state
	// (pending_build, building_snapshot, creating, starting, stopping,
	// destroying); zero means 5 ms.
	StepDelay time.Duration
	// Per-sandbox maxima (4 cores, 8 GB, 10 GB) and defaults (1, 1, 3).
	MaxCPU, MaxMemoryGB, MaxDiskGB int
	// Account quotas in total; zero means no quota. Disk counts every
	// sandbox not destroyed (stopped ones too), CPU and memory the running.
	CPUQuota, MemoryQuotaGB, DiskQuotaGB int
	// RefuseDeleteStarted makes DELETE of a started sandbox answer 400, as
	// older servers did; the driver must stop it first.
	RefuseDeleteStarted bool
	// PageSize is the page size of GET /sandbox; zero means 100.
	PageSize int
	// SnapshotClasses gives the sandbox class of sandboxes made from a
	// snapshot, by snapshot name; any other sandbox is a "container".
	// Only linux-vm and windows sandboxes can be paused and forked, as on
	// Daytona.
	SnapshotClasses map[string]string
	// Listen is the address to serve on; "" means a loopback port.
	Listen string
	// Record keeps every request's and answer's JSON body (Exchanges), for
	// schema checks.
	Record bool
}

// Request is one request the server received.
type Request struct {
	Method string
	Path   string
	Status int
	At     time.Time
}

// Fault answers matching requests with an error instead of serving them.
type Fault struct {
	// Method matches the request method; "" matches any.
	Method string
	// Path matches the URL path exactly, or as a prefix when it ends in "*".
	Path string
	// Times is how many requests the fault answers; zero means one.
	Times int
	// Status and Message make the error body {statusCode, error, message}.
	// "{auth}" in Message becomes the request's Authorization header, as a
	// careless proxy might echo it.
	Status  int
	Message string
	// Header is added to the answer (Retry-After-<throttler>).
	Header map[string]string
	// AfterServing serves the request first and then answers with the
	// error instead: an answer lost after the work was done.
	AfterServing bool
}

func (f *Fault) matches(r *http.Request) bool {
	if f.Method != "" && f.Method != r.Method {
		return false
	}
	if p, ok := strings.CutSuffix(f.Path, "*"); ok {
		return strings.HasPrefix(r.URL.Path, p)
	}
	return r.URL.Path == f.Path
}

// Server is a running fake Daytona. Its methods are safe for concurrent use.
type Server struct {
	opts Options
	srv  *httptest.Server
	eng  *fakeengine.Engine // the sandboxes' trees, processes and TTLs

	mu        sync.Mutex
	sandboxes map[string]*sandbox // by ID
	faults    []*Fault
	requests  []Request
	buildFail []string // build logs of the next builds to fail
	drops     []int    // byte counts after which the next log streams drop
	dropped   int
	exchanges []Exchange
	signed    map[string]signedURL // signed preview URLs by token
	closed    bool

	wg   sync.WaitGroup // state changes, reaper, commands
	stop chan struct{}
}

// New starts a server.
func New(opts Options) (*Server, error) {
	if opts.APIKey == "" {
		opts.APIKey = "dtn_" + randomHex(16)
	}
	if opts.Minute <= 0 {
		opts.Minute = time.Minute
	}
	if opts.StepDelay <= 0 {
		opts.StepDelay = 5 * time.Millisecond
	}
	opts.MaxCPU = orDefault(opts.MaxCPU, 4)
	opts.MaxMemoryGB = orDefault(opts.MaxMemoryGB, 8)
	opts.MaxDiskGB = orDefault(opts.MaxDiskGB, 10)
	opts.PageSize = orDefault(opts.PageSize, 100)
	s := &Server{opts: opts, sandboxes: map[string]*sandbox{}, signed: map[string]signedURL{}, stop: make(chan struct{})}
	// The TTL destroys a sandbox whatever its state, through destroying.
	eng, err := fakeengine.New(fakeengine.Options{Dir: opts.Dir, OnExpire: func(eb *fakeengine.Sandbox) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.destroyLocked(eb.Value.(*sandbox))
	}})
	if err != nil {
		return nil, err
	}
	s.eng = eng
	mux := http.NewServeMux()
	s.routes(mux)
	s.srv = httptest.NewUnstartedServer(s.middleware(mux))
	if opts.Listen != "" {
		lis, err := net.Listen("tcp", opts.Listen)
		if err != nil {
			eng.Close()
			return nil, err
		}
		s.srv.Listener.Close()
		s.srv.Listener = lis
	}
	s.srv.Start()
	s.wg.Add(1)
	go s.reaper()
	return s, nil
}

func orDefault(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

// URL is the REST API's base, for DAYTONA_API_URL.
func (s *Server) URL() string { return s.srv.URL + "/api" }

// APIKey is the key the server accepts.
func (s *Server) APIKey() string { return s.opts.APIKey }

// Client returns an HTTP client for the server.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Close kills every sandbox's processes, stops the server and removes the
// sandboxes' files.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.stop)
	for _, sb := range s.sandboxes {
		s.killSessions(sb)
	}
	s.mu.Unlock()
	s.srv.CloseClientConnections()
	s.srv.Close()
	s.wg.Wait()
	s.eng.Close()
}

// Inject adds a fault. Faults are tried in the order they were added.
func (s *Server) Inject(f Fault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	s.mu.Lock()
	s.faults = append(s.faults, &f)
	s.mu.Unlock()
}

// RateLimit answers the next n requests of method and path with Daytona's
// 429, advising a wait of retryAfter seconds in Retry-After-<throttler>.
func (s *Server) RateLimit(method, path string, n int, throttler string, retryAfter int) {
	s.Inject(Fault{Method: method, Path: path, Times: n, Status: http.StatusTooManyRequests, Message: "Rate limit exceeded",
		Header: map[string]string{
			"X-RateLimit-Limit-" + throttler:     "10",
			"X-RateLimit-Remaining-" + throttler: "0",
			"X-RateLimit-Reset-" + throttler:     strconv.Itoa(retryAfter),
			"Retry-After-" + throttler:           strconv.Itoa(retryAfter),
		}})
}

// FailBuilds makes the next n image builds end in build_failed, with log
// as their build log.
func (s *Server) FailBuilds(n int, log string) {
	s.mu.Lock()
	for range n {
		s.buildFail = append(s.buildFail, log)
	}
	s.mu.Unlock()
}

// DropStreams makes the next n command log streams break off, without a
// close frame, once they have sent afterBytes bytes.
func (s *Server) DropStreams(n, afterBytes int) {
	s.mu.Lock()
	for range n {
		s.drops = append(s.drops, afterBytes)
	}
	s.mu.Unlock()
}

// Dropped is how many log streams the server has cut.
func (s *Server) Dropped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Live returns the IDs of sandboxes not destroyed.
func (s *Server) Live() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id, sb := range s.sandboxes {
		if sb.State != stateDestroyed {
			ids = append(ids, id)
		}
	}
	return ids
}

// Sandbox returns the API's view of a sandbox by ID or name, as the
// driver would read it; false when there is none.
func (s *Server) Sandbox(idOrName string) (Sandbox, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.find(idOrName)
	if sb == nil {
		return Sandbox{}, false
	}
	return s.dto(sb), true
}

// History returns the states a created sandbox has been through, for
// tests that cannot count on seeing a short-lived one: its first and those
// the server moved it to (a call that sets a state directly, such as a
// stop, shows in the states that follow it).
func (s *Server) History(idOrName string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb := s.find(idOrName); sb != nil {
		return append([]string(nil), sb.history...)
	}
	return nil
}

// State returns the state of a sandbox, "" when there is none.
func (s *Server) State(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb := s.find(id); sb != nil {
		return sb.State
	}
	return ""
}

// statusWriter records the status of an answer, and what writeError needs
// to know of its request: the envelope of an API error differs from the
// daemon's.
type statusWriter struct {
	http.ResponseWriter
	status int
	r      *http.Request
	body   *bytes.Buffer // a copy of the answer's body, when recording
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.body != nil && w.body.Len() < maxRecorded {
		w.body.Write(b[:min(len(b), maxRecorded-w.body.Len())])
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController (WebSocket hijacking, flushing)
// reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, r: r}
		at := time.Now()
		var reqBody []byte
		if s.opts.Record {
			sw.body = &bytes.Buffer{}
			reqBody = teeBody(r)
		}
		defer func() {
			s.mu.Lock()
			s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Status: sw.status, At: at})
			if s.opts.Record {
				s.exchanges = append(s.exchanges, Exchange{
					Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Status: sw.status,
					RequestType: r.Header.Get("Content-Type"), Request: reqBody,
					ResponseType: sw.Header().Get("Content-Type"), Response: sw.body.Bytes(),
				})
			}
			s.mu.Unlock()
		}()
		if strings.HasPrefix(r.URL.Path, previewPrefix) || strings.HasPrefix(r.URL.Path, signedPrefix) {
			// The preview proxy has its own credentials: the sandbox's
			// preview token, or a signed URL's.
			next.ServeHTTP(sw, r)
			return
		}
		authorized := r.Header.Get("Authorization") == "Bearer "+s.opts.APIKey
		if f := s.takeFault(r); f != nil {
			if f.AfterServing && authorized {
				next.ServeHTTP(httptest.NewRecorder(), r)
			}
			for k, v := range f.Header {
				sw.Header().Set(k, v)
			}
			writeError(sw, f.Status, strings.ReplaceAll(f.Message, "{auth}", r.Header.Get("Authorization")))
			return
		}
		if !authorized {
			writeError(sw, http.StatusUnauthorized, "Unauthorized")
			return
		}
		next.ServeHTTP(sw, r)
	})
}

// maxRecorded bounds each body an Exchange keeps.
const maxRecorded = 1 << 20

// teeBody returns the start of r's body and leaves the body readable.
func teeBody(r *http.Request) []byte {
	if r.Body == nil {
		return nil
	}
	head, _ := io.ReadAll(io.LimitReader(r.Body, maxRecorded))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	return head
}

// Exchange is one request and its answer, kept when Options.Record is set:
// the JSON bodies are what a schema check reads.
type Exchange struct {
	Method, Path string
	Query        url.Values
	Status       int
	// RequestType and ResponseType are the Content-Type headers.
	RequestType, ResponseType string
	// Request and Response are the bodies, at most 1 MiB each.
	Request, Response []byte
}

// Exchanges returns the exchanges recorded so far (Options.Record).
func (s *Server) Exchanges() []Exchange {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Exchange(nil), s.exchanges...)
}

func (s *Server) takeFault(r *http.Request) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if f.matches(r) {
			f.Times--
			if f.Times <= 0 {
				s.faults = append(s.faults[:i], s.faults[i+1:]...)
			}
			return f
		}
	}
	return nil
}

// writeError writes an error in the envelope of the part of Daytona that
// answers: the API's {path, timestamp, statusCode, error, message}, or the
// toolbox daemon's {statusCode, message, code, timestamp, path, method,
// source}, whose code and source the SDKs map onto their error types.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeCodedError(w, status, "", msg)
}

// writeCodedError is writeError with the daemon's machine-readable code
// ("" derives it from the status).
func writeCodedError(w http.ResponseWriter, status int, code, msg string) {
	var r *http.Request
	if sw, ok := w.(*statusWriter); ok {
		r = sw.r
	}
	body := map[string]any{
		"statusCode": status,
		"message":    msg,
		"timestamp":  time.Now().UTC().Format(time.RFC3339Nano),
	}
	if r != nil {
		body["path"] = r.URL.Path
	}
	if r != nil && strings.HasPrefix(r.URL.Path, toolboxPrefix) {
		if code == "" {
			code = strings.ToUpper(strings.ReplaceAll(http.StatusText(status), " ", "_"))
		}
		body["code"], body["method"], body["source"] = code, r.Method, "DAYTONA_DAEMON"
	} else {
		body["error"] = http.StatusText(status)
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func readJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 16<<20))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid request body: %w", err)
	}
	return nil
}

func randomHex(n int) string { return fakeengine.RandomHex(n) }
