package podagent

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/internal/httpserve"
	"github.com/berth-sh/berth/internal/reap"
)

// What the provider and the agent agree on.
const (
	// Port is the agent's TCP port in the pod (envd's own port number).
	Port = 49983
	// BinaryDir is where the berth binary is mounted in the sandbox container.
	BinaryDir = "/.berth"
	// BinaryPath is the berth binary inside the sandbox container.
	BinaryPath = BinaryDir + "/berth"

	// EnvTokenSHA256 holds the hex SHA-256 of the access token.
	EnvTokenSHA256 = "BERTH_AGENT_TOKEN_SHA256"
	// EnvUser is the default user of commands; "" is the container's.
	EnvUser = "BERTH_AGENT_USER"
	// EnvDir is the default working directory; "" is "/".
	EnvDir = "BERTH_AGENT_DIR"
	// EnvPort overrides Port (tests that run several agents on one host).
	EnvPort = "BERTH_AGENT_PORT"
)

// agentEnv are the variables the agent reads and keeps out of the
// environment of the commands it starts.
var agentEnv = []string{EnvTokenSHA256, EnvUser, EnvDir, EnvPort, EnvPooled}

// TokenHash is the value of EnvTokenSHA256 for token.
func TokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// Options configure Main; the zero value reads the environment.
type Options struct {
	// Getenv reads the configuration; nil is os.Getenv.
	Getenv func(string) string
	// Listener overrides the TCP listener on Port (tests).
	Listener net.Listener
	// Logf logs the agent's events; nil is the standard logger.
	Logf func(format string, args ...any)
}

// Main serves envd until ctx ends. As PID 1 it reaps orphans and ignores
// the signals a sandbox's own processes could send it: the kubelet ends the
// pod with SIGKILL after its grace period.
func Main(ctx context.Context, o Options) error {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	want, err := hex.DecodeString(o.Getenv(EnvTokenSHA256))
	if err != nil || len(want) != sha256.Size {
		return fmt.Errorf("k8s agent: %s must be a hex SHA-256", EnvTokenSHA256)
	}
	env := os.Environ()
	for _, k := range agentEnv {
		env = dropEnv(env, k)
	}
	var handler http.Handler
	if o.Getenv(EnvPooled) == "1" {
		// A warm pod: the sandbox's settings come with its claim.
		pl := &pooled{pool: want, make: envdFor(env)}
		defer pl.Close()
		handler = pl
	} else {
		srv, err := envd.NewServer(envd.ServerOptions{
			// The token check is Auth's, on every route: envd sees only
			// authenticated calls.
			DefaultUser: o.Getenv(EnvUser),
			DefaultDir:  o.Getenv(EnvDir),
			Env:         env,
			// Under the pod's memory limit the OOM killer takes a
			// command, not the agent (and the sandbox with it).
			CommandOOMScoreAdj: envd.MaxOOMScoreAdj,
		})
		if err != nil {
			return fmt.Errorf("k8s agent: %w", err)
		}
		defer srv.Close()
		if dir := o.Getenv(EnvDir); dir != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("k8s agent: working directory: %w", err)
			}
		}
		handler = Auth(want, srv)
	}
	ln := o.Listener
	if ln == nil {
		port := Port
		if v := o.Getenv(EnvPort); v != "" {
			if port, err = strconv.Atoi(v); err != nil || port <= 0 || port > 65535 {
				return fmt.Errorf("k8s agent: %s=%q is not a port", EnvPort, v)
			}
		}
		if ln, err = net.Listen("tcp", ":"+strconv.Itoa(port)); err != nil {
			return fmt.Errorf("k8s agent: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if os.Getpid() == 1 {
		ctx = context.WithoutCancel(ctx)
		signal.Ignore(unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGPIPE)
		if reap.PidfdsWork() {
			go reap.Loop(ctx)
		} else {
			o.Logf("k8s agent: pidfds unavailable: not reaping orphans")
		}
	}
	o.Logf("k8s agent: serving envd on %s", ln.Addr())
	if err := httpserve.Serve(ctx, ln, handler, httpserve.Options{Grace: 2 * time.Second}); err != nil {
		return fmt.Errorf("k8s agent: serve: %w", err)
	}
	return nil
}

// Auth passes on the calls whose X-Access-Token hashes to want, and GET
// /health, which tells nothing. Everything else is 401 in envd's error
// shape. The comparison is constant-time on the hashes.
func Auth(want []byte, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/health" {
			next.ServeHTTP(w, r)
			return
		}
		got := sha256.Sum256([]byte(r.Header.Get(envd.AccessTokenHeader)))
		if subtle.ConstantTimeCompare(got[:], want) != 1 {
			envd.WriteHTTPError(w, http.StatusUnauthorized, "missing or invalid access token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Install copies the running binary to dst with mode 0555 (the
// initContainer's job), through a temporary file so that a reader never
// sees half a binary.
func Install(dst string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("k8s agent install: %w", err)
	}
	in, err := os.Open(exe)
	if err != nil {
		return fmt.Errorf("k8s agent install: %w", err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("k8s agent install: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".berth-*")
	if err != nil {
		return fmt.Errorf("k8s agent install: %w", err)
	}
	_, err = io.Copy(tmp, in)
	err = errors.Join(err, tmp.Chmod(0o555), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("k8s agent install: %w", err)
	}
	return nil
}

func dropEnv(env []string, key string) []string {
	out := env[:0]
	for _, kv := range env {
		if len(kv) > len(key) && kv[:len(key)] == key && kv[len(key)] == '=' {
			continue
		}
		out = append(out, kv)
	}
	return out
}
