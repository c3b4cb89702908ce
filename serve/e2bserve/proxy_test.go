package e2bserve

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/driver"
)

const innerToken = "inner-token-the-client-never-sees"

// agentProvider gives each sandbox an envd server of its own on a unix
// socket, as the local provider's agent does, and reports it through
// driver.EnvdServer. The envd server runs host processes in dir with
// BERTH_VIA=agent, so a test can tell which path a call took.
type agentProvider struct {
	driver.Provider
	t   testing.TB
	dir string

	mu     sync.Mutex
	agents map[string]string // sandbox ID -> socket
}

type agentSandbox struct {
	driver.Sandbox
	p *agentProvider
}

var _ driver.EnvdServer = agentSandbox{}

func (p *agentProvider) Create(ctx context.Context, spec driver.Spec) (driver.Sandbox, error) {
	sb, err := p.Provider.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	return agentSandbox{sb, p}, nil
}

func (s agentSandbox) EnvdEndpoint(context.Context) (driver.EnvdEndpoint, error) {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	sock, ok := p.agents[s.ID()]
	if !ok {
		srv, err := envd.NewServer(envd.ServerOptions{AccessToken: innerToken, DefaultDir: p.dir, Env: []string{"BERTH_VIA=agent", "PATH=" + os.Getenv("PATH")}})
		if err != nil {
			return driver.EnvdEndpoint{}, err
		}
		sock = filepath.Join(p.dir, s.ID()+".sock")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			return driver.EnvdEndpoint{}, err
		}
		hs := &http.Server{Handler: srv}
		go hs.Serve(ln)
		p.t.Cleanup(func() { hs.Close(); srv.Close() })
		p.agents[s.ID()] = sock
	}
	return driver.EnvdEndpoint{BaseURL: envd.UnixBaseURL, Transport: envd.UnixHTTPClient(sock).Transport, AccessToken: innerToken}, nil
}

func TestProxiedDataPlane(t *testing.T) {
	dir, err := os.MkdirTemp("", "berth-agent-") // short: unix socket paths are bounded
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e := newEnv(t, nil, func(d driver.Provider) driver.Provider {
		return &agentProvider{Provider: d, t: t, dir: dir, agents: map[string]string{}}
	})
	sb := e.Create(testKey, nil)
	c := e.EnvdClient(sb)
	ctx := context.Background()

	var out bytes.Buffer
	p, err := c.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", "echo via $BERTH_VIA; exit 4"}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(ctx); code != 4 || err != nil || out.String() != "via agent\n" {
		t.Fatalf("proxied exec: %d %v %q (want the agent's environment)", code, err, out.String())
	}
	target := filepath.Join(dir, "up", "f.txt")
	if err := c.WriteFile(ctx, target, strings.NewReader("through the proxy"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "through the proxy" {
		t.Fatalf("file written by the agent: %q %v", b, err)
	}
	rc, err := c.ReadFile(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "through the proxy" {
		t.Fatalf("read back %q", b)
	}
	if _, err := c.Stat(ctx, filepath.Join(dir, "nope")); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("stat of a missing path: %v", err)
	}
	// The server still checks the client's token and paths; the agent's
	// own token never reaches the client.
	h := map[string]string{e2bapi.SandboxIDHeader: sb.SandboxID, envd.AccessTokenHeader: innerToken}
	if r := e.filesCall("GET", "path="+target, nil, h); r.Status != 401 {
		t.Fatalf("the agent's token used by a client: %d", r.Status)
	}
	h[envd.AccessTokenHeader] = sb.EnvdAccessToken
	if r := e.filesCall("GET", "path=/tmp/../etc/passwd", nil, h); r.Status != 400 {
		t.Fatalf(".. through the proxy: %d", r.Status)
	}
	r := e.Call("GET", "/sandboxes/"+sb.SandboxID, testKey, nil, nil)
	if strings.Contains(string(r.Body), innerToken) {
		t.Fatal("the agent's token leaked into the control plane")
	}
}
