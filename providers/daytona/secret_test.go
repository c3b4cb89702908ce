package daytona_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/syncbuf"

	"github.com/berth-sh/berth/providers/daytona"
	"github.com/berth-sh/berth/providers/daytona/daytonatest"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
)

// TestNoSecretAnywhere runs a sandbox's life at debug level, then makes
// the server echo the Authorization header in error texts and a build log,
// and checks that the key appears in no log line, error, label or printed
// value.
func TestNoSecretAnywhere(t *testing.T) {
	const key = "dtn_k3y-that-must-never-leak-7f3a9c"
	srv := newServer(t, daytonatest.Options{APIKey: key})
	var logs syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts := daytona.Options{BaseURL: srv.URL(), APIKey: registry.Secret(key), Logger: logger}
	d, err := daytona.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p := sandbox.NewProvider("daytona", d, sandbox.WithLogger(logger))
	ctx := t.Context()
	var seen []string // every text the caller can get hold of
	note := func(err error) {
		if err != nil {
			seen = append(seen, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err))
		}
	}

	sb, err := p.Create(ctx, sandbox.Spec{Image: "busybox:1.36", Labels: map[string]string{"owner": "secret-test"}, Env: map[string]string{"A": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if daytonatest.Available() == "" {
		res, err := sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", "env; echo done"}})
		note(err)
		seen = append(seen, string(res.Stdout), string(res.Stderr))
	}
	note(sb.WriteFile(ctx, "/tmp/f", []byte("x"), 0o600))
	infos, err := p.List(ctx, map[string]string{"owner": "secret-test"})
	note(err)
	if len(infos) != 1 {
		t.Fatalf("list found %d sandboxes, want 1", len(infos))
	}
	seen = append(seen, fmt.Sprintf("%+v", infos))

	// Server texts that echo the header, on the control plane and the
	// toolbox, and a build log that holds it.
	srv.Inject(daytonatest.Fault{Method: http.MethodGet, Path: "/api/sandbox/*", Status: http.StatusInternalServerError, Message: "backend rejected {auth}"})
	_, err = p.Connect(ctx, sb.ID())
	note(err)
	srv.Inject(daytonatest.Fault{Method: http.MethodPost, Path: "/api/sandbox", Status: http.StatusUnauthorized, Message: "invalid credentials: {auth}"})
	_, err = p.Create(ctx, sandbox.Spec{Image: "busybox:1.36"})
	note(err)
	srv.Inject(daytonatest.Fault{Path: "/toolbox/*", Status: http.StatusBadRequest, Message: "token {auth} is not valid for the toolbox"})
	_, err = sb.Stat(ctx, "/tmp/f")
	note(err)
	srv.FailBuilds(1, "#1 RUN curl -H 'Authorization: Bearer "+key+"' https://example.com\n#1 ERROR: exit code 22\n")
	_, err = p.Create(ctx, sandbox.Spec{Image: "busybox:1.36"})
	note(err)
	dsb, err := d.Connect(ctx, sb.ID())
	note(err)
	seen = append(seen, fmt.Sprintf("%v %+v %#v", dsb, dsb, dsb))
	if dsb != nil {
		dsb.Close()
	}
	note(sb.Delete(ctx))

	redactions := 0
	for _, s := range seen {
		redactions += strings.Count(s, "[redacted]")
	}
	if redactions < 4 {
		t.Errorf("only %d redactions in the errors: the echoes did not reach the driver, so this test proves nothing\n%s", redactions, strings.Join(seen, "\n"))
	}
	seen = append(seen, logs.String(), fmt.Sprintf("%+v %#v %v", opts, opts, d))
	for _, s := range seen {
		if strings.Contains(s, key) || strings.Contains(s, key[4:]) {
			t.Errorf("the API key leaked into:\n%s", s)
		}
	}
	if !strings.Contains(logs.String(), "daytona request") {
		t.Error("no debug logs were written; the log check proves nothing")
	}
}
