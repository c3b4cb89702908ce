package modaltest

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/berth-sh/berth/internal/testing/fakeengine"
)

// The token pair a server accepts when Options leave it empty.
const (
	DefaultTokenID     = "ak-modaltest"
	DefaultTokenSecret = "as-modaltest"
)

// Options configure a Server. The zero value is usable.
type Options struct {
	// TokenID and TokenSecret are the only credential accepted.
	TokenID, TokenSecret string
	// Environments are the workspace's environments; the first is the
	// default. Empty means just "main".
	Environments []string
	// Dir holds the sandboxes' trees; "" means a temporary directory that
	// Close removes.
	Dir string
	// Busybox, when set (see Busybox), is a static busybox put in every
	// sandbox's /bin; commands then run confined to the sandbox's tree (by
	// chroot as root, in a user namespace otherwise), so absolute paths in
	// them are sandbox paths. Without it commands are host processes
	// started in the mapped working directory, and only their working
	// directory is a sandbox path.
	Busybox string
}

// Server is a running in-process Modal server.
type Server struct {
	opts     Options
	lis      net.Listener
	srv      *grpc.Server
	eng      *fakeengine.Engine // the sandboxes
	imageDir string             // the snapshots' trees

	mu          sync.Mutex
	authTokens  map[string]time.Time // issued auth tokens and their expiry
	apps        map[string]*app      // by environment + "/" + name
	images      map[string]*image    // by Dockerfile text
	imagesByID  map[string]*image
	snapshots   map[string]string   // file system snapshots' image IDs, by the client's snapshot ID
	sandboxes   map[string]*sandbox // by sandbox ID
	tasks       map[string]*sandbox // by task ID
	lastCreated float64
	calls       map[string][]Call
	faults      faults
	closed      bool

	procs sync.WaitGroup // goroutines of the file tool and of refused commands

	caOnce sync.Once // the tunnels' certificates (tunnels.go)
	ca     *x509.Certificate
	leaf   *tls.Certificate
	caErr  error
}

// Start serves a new Server on a loopback port.
func Start(opts Options) (*Server, error) {
	if opts.TokenID == "" {
		opts.TokenID = DefaultTokenID
	}
	if opts.TokenSecret == "" {
		opts.TokenSecret = DefaultTokenSecret
	}
	if len(opts.Environments) == 0 {
		opts.Environments = []string{"main"}
	}
	s := &Server{
		opts:       opts,
		authTokens: map[string]time.Time{},
		apps:       map[string]*app{},
		images:     map[string]*image{},
		imagesByID: map[string]*image{},
		snapshots:  map[string]string{},
		sandboxes:  map[string]*sandbox{},
		tasks:      map[string]*sandbox{},
		calls:      map[string][]Call{},
		faults:     newFaults(),
	}
	eng, err := fakeengine.New(fakeengine.Options{Dir: opts.Dir, OnExpire: func(eb *fakeengine.Sandbox) {
		eb.Value.(*sandbox).finish(fakeengine.Expired)
	}})
	if err != nil {
		return nil, err
	}
	s.eng, s.imageDir = eng, filepath.Join(eng.Dir(), "images")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		eng.Close()
		return nil, err
	}
	s.lis = lis
	s.srv = grpc.NewServer(
		grpc.ChainUnaryInterceptor(s.unary),
		grpc.ChainStreamInterceptor(s.stream),
		grpc.MaxRecvMsgSize(100<<20),
		grpc.MaxSendMsgSize(100<<20),
	)
	pb.RegisterModalClientServer(s.srv, &control{s: s})
	pb.RegisterTaskCommandRouterServer(s.srv, &router{s: s})
	go func() { _ = s.srv.Serve(lis) }()
	return s, nil
}

// New starts a Server for a test and closes it when the test ends.
func New(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatalf("modaltest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("modaltest: close: %v", err)
		}
	})
	return s
}

// PointSDK points the Modal SDK of this process at s for t's life: the
// SDK reads its server, config file, profile and sandbox API from the
// process environment (t.Setenv, so t must not run in parallel).
func (s *Server) PointSDK(t testing.TB) {
	t.Setenv("MODAL_SERVER_URL", s.URL())
	t.Setenv("MODAL_CONFIG_PATH", filepath.Join(t.TempDir(), "absent.toml"))
	t.Setenv("MODAL_PROFILE", "")
	t.Setenv("MODAL_SANDBOX_V2", "1")
}

// URL is the control plane's address, for MODAL_SERVER_URL.
func (s *Server) URL() string { return "http://" + s.lis.Addr().String() }

// routerURL is the command router's address. The SDK insists on https and,
// for a localhost control plane, then dials it without TLS.
func (s *Server) routerURL() string { return "https://" + s.lis.Addr().String() }

// TokenID and TokenSecret are the credential the server accepts.
func (s *Server) TokenID() string     { return s.opts.TokenID }
func (s *Server) TokenSecret() string { return s.opts.TokenSecret }

// Close ends every sandbox, stops serving and removes the sandboxes' trees.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	sbs := make([]*sandbox, 0, len(s.sandboxes))
	for _, sb := range s.sandboxes {
		sbs = append(sbs, sb)
	}
	s.mu.Unlock()
	for _, sb := range sbs {
		sb.finish(fakeengine.Closed)
	}
	s.srv.Stop()
	s.procs.Wait()
	s.eng.Close()
	// Snapshots' trees are the server's own, wherever they are.
	return os.RemoveAll(s.imageDir)
}

// Call is one call the server received.
type Call struct {
	Time time.Time
	// Attempt and ThrottleAttempt are the SDK's x-retry-attempt and
	// x-throttle-retry-attempt headers.
	Attempt, ThrottleAttempt int
	// Err is the status the server's interceptor answered with before the
	// handler ran (an injected fault or an auth failure), else nil.
	Err error
}

// Calls returns the calls of one method ("SandboxCreateV2",
// "TaskExecStdioRead") in the order they arrived.
func (s *Server) Calls(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls[method]...)
}

const (
	controlPrefix = "/modal.client.ModalClient/"
	routerPrefix  = "/modal.task_command_router.TaskCommandRouter/"
)

func (s *Server) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := s.admit(ctx, info.FullMethod, true); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (s *Server) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := s.admit(ss.Context(), info.FullMethod, false); err != nil {
		return err
	}
	return handler(srv, ss)
}

// admit authenticates a call, records it and injects a fault if one is set.
// Router calls are checked against their task in the handlers, which know
// the task ID; here they need only carry a bearer token.
func (s *Server) admit(ctx context.Context, full string, unary bool) error {
	md, _ := metadata.FromIncomingContext(ctx)
	method := path.Base(full)
	err := s.authenticate(md, full, method, unary)
	if err == nil {
		err = s.faults.inject(method)
	}
	c := Call{Time: time.Now(), Err: err}
	c.Attempt, _ = strconv.Atoi(first(md, "x-retry-attempt"))
	c.ThrottleAttempt, _ = strconv.Atoi(first(md, "x-throttle-retry-attempt"))
	s.mu.Lock()
	s.calls[method] = append(s.calls[method], c)
	s.mu.Unlock()
	return err
}

// The SDK sends the auth token on unary calls only; streams carry the token
// pair alone.
func (s *Server) authenticate(md metadata.MD, full, method string, unary bool) error {
	switch {
	case strings.HasPrefix(full, controlPrefix):
		if !equal(first(md, "x-modal-token-id"), s.opts.TokenID) || !equal(first(md, "x-modal-token-secret"), s.opts.TokenSecret) {
			return status.Error(codes.Unauthenticated, "Token ID or secret is invalid")
		}
		if method == "AuthTokenGet" || !unary {
			return nil
		}
		s.mu.Lock()
		exp, ok := s.authTokens[first(md, "x-modal-auth-token")]
		s.mu.Unlock()
		if !ok || time.Now().After(exp) {
			return status.Error(codes.Unauthenticated, "auth token is missing or expired")
		}
		return nil
	case strings.HasPrefix(full, routerPrefix):
		if !strings.HasPrefix(first(md, "authorization"), "Bearer ") {
			return status.Error(codes.Unauthenticated, "missing bearer token")
		}
		return nil
	}
	return status.Errorf(codes.Unimplemented, "unknown service of %s", method)
}

// checkRouterAuth requires the bearer token issued for the sandbox.
func checkRouterAuth(ctx context.Context, sb *sandbox) error {
	md, _ := metadata.FromIncomingContext(ctx)
	tok, _ := strings.CutPrefix(first(md, "authorization"), "Bearer ")
	if !equal(tok, sb.routerJWT) {
		return status.Error(codes.Unauthenticated, "bearer token is not valid for this task")
	}
	return nil
}

func first(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// issueAuthToken returns a JWT-shaped token whose exp claim the SDK reads.
func (s *Server) issueAuthToken() string {
	exp := time.Now().Add(time.Hour)
	tok := jwt(map[string]any{"exp": exp.Unix(), "sub": "modaltest"})
	s.mu.Lock()
	s.authTokens[tok] = exp
	s.mu.Unlock()
	return tok
}

// jwt builds an unsigned-in-spirit token: header.payload.random.
func jwt(claims map[string]any) string {
	enc := base64.RawURLEncoding
	hdr := enc.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	body, _ := json.Marshal(claims)
	return hdr + "." + enc.EncodeToString(body) + "." + randomID(22)
}

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// randomID returns n base62 characters.
func randomID(n int) string {
	b := make([]byte, n)
	for i := range b {
		v, err := rand.Int(rand.Reader, big.NewInt(int64(len(idAlphabet))))
		if err != nil {
			panic(err)
		}
		b[i] = idAlphabet[v.Int64()]
	}
	return string(b)
}

// createdAt returns a creation time strictly after the last one, so that
// SandboxListV2's before_timestamp paging never skips a sandbox.
func (s *Server) createdAtLocked() float64 {
	now := float64(time.Now().UnixNano()) / 1e9
	if now <= s.lastCreated {
		now = s.lastCreated + 1e-6
	}
	s.lastCreated = now
	return now
}

func (s *Server) sandboxByTask(taskID string) (*sandbox, error) {
	s.mu.Lock()
	sb, ok := s.tasks[taskID]
	s.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "task %s not found", short(taskID))
	}
	return sb, nil
}

func (s *Server) sandboxByID(id string) (*sandbox, error) {
	s.mu.Lock()
	sb, ok := s.sandboxes[id]
	s.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "Sandbox %s not found", short(id))
	}
	return sb, nil
}

// short bounds a client-supplied value echoed in an error.
func short(v string) string {
	if len(v) > 64 {
		return v[:64] + "..."
	}
	return fmt.Sprintf("%q", v)
}

var errClosed = errors.New("modaltest: server closed")
