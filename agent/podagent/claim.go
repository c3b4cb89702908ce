package podagent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// A warm pod (agent-sandbox mode) starts before anyone has asked for it,
// from a pod template shared by every sandbox of its shape: its pod spec
// can hold no sandbox's token, user, working directory or environment.
// Its agent starts pooled (EnvPooled): it answers /health, and ClaimPath
// with the pool's token (EnvTokenSHA256 holds that one's hash), and nothing
// else. The provider, once agent-sandbox's controller has given it the pod
// for a SandboxClaim, posts the sandbox's settings there; from then on the
// agent serves envd to the sandbox's own token only, and the pool's token
// opens nothing. A claim cannot be made twice.
const (
	// EnvPooled set to "1" starts the agent pooled.
	EnvPooled = "BERTH_AGENT_POOLED"
	// ClaimPath is where a pooled agent takes its sandbox's settings.
	ClaimPath = "/berth/claim"
	// maxClaimBytes bounds a claim's body (its environment, mostly).
	maxClaimBytes = 1 << 20
)

// Claim is the body of POST ClaimPath: a sandbox's settings.
type Claim struct {
	// TokenSHA256 is the hex SHA-256 of the sandbox's access token.
	TokenSHA256 string `json:"token_sha256"`
	// User and Dir are as EnvUser and EnvDir.
	User string `json:"user,omitempty"`
	Dir  string `json:"dir,omitempty"`
	// Env is added to the environment of every command.
	Env map[string]string `json:"env,omitempty"`
}

// serverFor builds the envd server of a sandbox's settings; base is the
// agent's own environment, without its variables.
type serverFor func(c Claim) (http.Handler, io.Closer, error)

// pooled serves a pooled agent: until claimed, /health and ClaimPath; after,
// the envd server of the claim behind its token.
type pooled struct {
	pool []byte // SHA-256 of the pool's token
	make serverFor

	mu      sync.Mutex // one claim at a time
	claimed atomic.Pointer[http.Handler]
	closer  io.Closer
}

func (p *pooled) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := p.claimed.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/health":
		w.WriteHeader(http.StatusNoContent)
	case !tokenIs(r, p.pool):
		envd.WriteHTTPError(w, http.StatusUnauthorized, "missing or invalid access token")
	case r.Method == http.MethodPost && r.URL.Path == ClaimPath:
		p.claim(w, r)
	default:
		envd.WriteHTTPError(w, http.StatusConflict, "this sandbox has not been claimed yet")
	}
}

func (p *pooled) claim(w http.ResponseWriter, r *http.Request) {
	var c Claim
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxClaimBytes)).Decode(&c); err != nil {
		envd.WriteHTTPError(w, http.StatusBadRequest, "claim: %v", err)
		return
	}
	want, err := hex.DecodeString(c.TokenSHA256)
	if err != nil || len(want) != sha256.Size {
		envd.WriteHTTPError(w, http.StatusBadRequest, "claim: token_sha256 must be a hex SHA-256")
		return
	}
	if c.Dir != "" && !filepath.IsAbs(c.Dir) {
		envd.WriteHTTPError(w, http.StatusBadRequest, "claim: dir %q is not absolute", c.Dir)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.claimed.Load() != nil {
		// The token was checked before the lock: a second claim, racing
		// the first, finds it taken.
		envd.WriteHTTPError(w, http.StatusConflict, "this sandbox is already claimed")
		return
	}
	srv, closer, err := p.make(c)
	if err != nil {
		envd.WriteHTTPError(w, http.StatusBadRequest, "claim: %v", err)
		return
	}
	var h http.Handler = Auth(want, srv)
	p.closer = closer
	p.claimed.Store(&h)
	w.WriteHeader(http.StatusNoContent)
}

func (p *pooled) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closer != nil {
		return p.closer.Close()
	}
	return nil
}

// tokenIs compares the presented token's hash with want in constant time.
func tokenIs(r *http.Request, want []byte) bool {
	got := sha256.Sum256([]byte(r.Header.Get(envd.AccessTokenHeader)))
	return subtle.ConstantTimeCompare(got[:], want) == 1
}

// envdFor is serverFor over envd: the claim's environment after the
// agent's own (a claim's value wins), its user and directory.
func envdFor(base []string) serverFor {
	return func(c Claim) (http.Handler, io.Closer, error) {
		env := append([]string(nil), base...)
		for k, v := range c.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsAny(v, "\x00") {
				return nil, nil, fmt.Errorf("environment variable %q is not NAME=VALUE", k)
			}
			env = append(dropEnv(env, k), k+"="+v)
		}
		if c.Dir != "" {
			if err := os.MkdirAll(c.Dir, 0o755); err != nil {
				return nil, nil, fmt.Errorf("working directory: %w", err)
			}
		}
		srv, err := envd.NewServer(envd.ServerOptions{DefaultUser: c.User, DefaultDir: c.Dir, Env: env, CommandOOMScoreAdj: envd.MaxOOMScoreAdj})
		if err != nil {
			return nil, nil, err
		}
		return srv, srv, nil
	}
}

// PostClaim posts c to a pooled agent at base with the pool's token.
func PostClaim(ctx context.Context, hc *http.Client, base, poolToken string, c Claim) error {
	body, err := json.Marshal(c)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+ClaimPath, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(envd.AccessTokenHeader, poolToken)
	resp, err := hc.Do(req)
	if err != nil {
		return errdefs.Errorf(errdefs.Unavailable, "claim: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent {
		return nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return errdefs.Errorf(errdefs.ClassOfHTTPStatus(resp.StatusCode), "claim: %s: %s", resp.Status, bytes.TrimSpace(msg))
}
