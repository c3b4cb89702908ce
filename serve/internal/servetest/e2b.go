package servetest

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/sandbox"
)

// Create makes a sandbox through the E2B API (POST /v2/sandboxes) with key
// and returns the create answer, failing the test unless it is 201.
func (e *Env) Create(key string, body any) e2bapi.Sandbox {
	e.T.Helper()
	r := e.Call("POST", e2bapi.RouteSandboxesV2, key, body, nil)
	if r.Status != http.StatusCreated {
		e.T.Fatalf("create: %d %s", r.Status, r.Body)
	}
	var sb e2bapi.Sandbox
	r.JSON(e.T, &sb)
	return sb
}

// headerTransport adds headers to every request, as the SDKs do.
type headerTransport struct {
	rt http.RoundTripper
	h  map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header.Set(k, v)
	}
	return t.rt.RoundTrip(r)
}

// EnvdClient is berth's own envd client pointed at a sandbox through the
// server, routed by E2b-Sandbox-Id as SDKs >= 2.7 do.
func (e *Env) EnvdClient(sb e2bapi.Sandbox) *envd.Client {
	e.T.Helper()
	hc := &http.Client{Transport: headerTransport{rt: http.DefaultTransport, h: map[string]string{
		e2bapi.SandboxIDHeader: sb.SandboxID, e2bapi.SandboxPortHeader: e2bapi.EnvdPort,
	}}}
	c, err := envd.NewClient(e.URL, hc, envd.WithAccessToken(sb.EnvdAccessToken), envd.WithKeepalive(0))
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() { c.Close() })
	return c
}

// Httpd starts busybox httpd on port in the server's sandbox id, serving
// mark at /, in the foreground of a command that is not waited for (the
// fake backend kills what a finished command left), and waits until it
// answers inside.
func (e *Env) Httpd(id string, port int, mark string) {
	e.T.Helper()
	rec := e.C.Get(id)
	if rec == nil {
		e.T.Fatalf("no sandbox %s", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := "/tmp/www-" + strconv.Itoa(port)
	sh := func(script string) {
		e.T.Helper()
		res, err := rec.Sandbox.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", script}})
		if err != nil || res.ExitCode != 0 {
			e.T.Fatalf("%s: %v exit %d %s", script, err, res.ExitCode, res.Stderr)
		}
	}
	sh(fmt.Sprintf("mkdir -p %[1]s && echo %[2]s > %[1]s/index.html", dir, mark))
	proc, err := rec.Sandbox.Exec(context.Background(), sandbox.Command{Args: []string{"busybox", "httpd", "-f", "-p", strconv.Itoa(port), "-h", dir}})
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() { _ = proc.Signal(context.Background(), sandbox.SIGKILL) })
	sh(fmt.Sprintf("for i in $(busybox seq 600); do busybox wget -q -O - http://127.0.0.1:%d/ >/dev/null 2>&1 && exit 0; sleep 0.1; done; exit 1", port))
}
