package daytona_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/providers/daytona"
	"github.com/berth-sh/berth/providers/daytona/daytonatest"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// TestDiskQuotaCap: with the account's disk quota given, the driver keeps
// its sandboxes' disk under it (a create waits for room) instead of
// running into the quota refusal.
func TestDiskQuotaCap(t *testing.T) {
	srv := newServer(t, daytonatest.Options{DiskQuotaGB: 6})
	p := sandbox.NewProvider("daytona", openDriver(t, srv, func(o *daytona.Options) { o.DiskQuotaGB = 6 }))
	ctx := t.Context()
	var held []*sandbox.Sandbox
	for range 2 {
		sb, err := p.Create(ctx, spec) // 3 GB each by default
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		held = append(held, sb)
	}
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err := p.Create(wctx, spec)
	if !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "6 GB total disk quota") {
		t.Fatalf("third create while 6 of 6 GB are held: %v", err)
	}
	if n := len(requestsTo(srv, http.MethodPost, "/api/sandbox")); n != 2 {
		t.Fatalf("%d creates reached the server; the cap let one through", n)
	}
	// Deleting one frees its share for the next.
	if err := held[0].Delete(ctx); err != nil {
		t.Fatal(err)
	}
	waitNoneOf(t, srv, held[0].ID())
	sb, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatalf("create after a delete freed room: %v", err)
	}
	defer sb.Close()
	// A sandbox larger than the whole quota never fits: permanent.
	big := spec
	big.Resources.StorageMB = 7 * 1024
	_, err = p.Create(ctx, big)
	if !errors.Is(err, errdefs.ErrResourceExhausted) || errdefs.Retryable(err) {
		t.Errorf("create larger than the quota: %v, want a permanent ResourceExhausted", err)
	}
	for _, s := range []*sandbox.Sandbox{held[1], sb} {
		if err := s.Delete(ctx); err != nil {
			t.Error(err)
		}
	}
}

// waitNoneOf waits until the server has finished destroying id.
func waitNoneOf(t *testing.T, srv *daytonatest.Server, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for srv.State(id) != "" {
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s still %s", id, srv.State(id))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSetTimeoutIsTheTTL: the Spec's TTL is Daytona's TTL (a deadline
// that destroys the sandbox whatever it does), not auto-stop, which is
// off; SetTimeout moves the deadline. On a clock whose minute is 50 ms the
// sandbox is gone soon after SetTimeout(30s) (one minute).
func TestSetTimeoutIsTheTTL(t *testing.T) {
	srv := newServer(t, daytonatest.Options{Minute: 50 * time.Millisecond})
	p := sandbox.NewProvider("daytona", openDriver(t, srv, nil))
	ctx := t.Context()
	s := spec
	s.TTL = 10 * time.Hour // 600 minutes: 30 s on this clock
	start := time.Now()
	sb, err := p.Create(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	v, _ := srv.Sandbox(sb.ID())
	at, err := time.Parse(time.RFC3339Nano, v.AutoDestroyAt)
	if err != nil || v.AutoStopInterval != 0 || at.Before(start.Add(30*time.Second)) || at.After(time.Now().Add(30*time.Second)) {
		t.Fatalf("created with autostop %d, autoDestroyAt %q (%v): want no auto-stop and a deadline 600 fake minutes on", v.AutoStopInterval, v.AutoDestroyAt, err)
	}
	infos, err := p.List(ctx, s.Labels)
	if err != nil || len(infos) != 1 || !infos[0].ExpiresAt.Equal(at) {
		t.Fatalf("list: %+v %v, want the deadline %v as ExpiresAt", infos, err, at)
	}
	if err := sb.SetTimeout(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := p.Connect(ctx, sb.ID())
		if errors.Is(err, errdefs.ErrNotFound) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the sandbox outlived its TTL")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConnectStartsAStoppedSandbox: a sandbox stopped by auto-stop and
// kept (auto-delete later) is started again by Connect.
func TestConnectStartsAStoppedSandbox(t *testing.T) {
	srv, p, sb := openSandbox(t, daytonatest.Options{})
	ctx := t.Context()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/sandbox/"+sb.ID()+"/stop", nil)
	req.Header.Set("Authorization", "Bearer "+srv.APIKey())
	resp, err := srv.Client().Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stop: %v %v", resp, err)
	}
	resp.Body.Close()
	again, err := p.Connect(ctx, sb.ID())
	if err != nil {
		t.Fatalf("connect to a stopped sandbox: %v", err)
	}
	defer again.Close()
	if st := srv.State(sb.ID()); st != "started" {
		t.Errorf("state after connect: %s, want started", st)
	}
	if err := again.Delete(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestListPages: List follows nextCursor over every page and keeps only
// matching, live sandboxes.
func TestListPages(t *testing.T) {
	srv := newServer(t, daytonatest.Options{PageSize: 2})
	p := sandbox.NewProvider("daytona", openDriver(t, srv, nil))
	ctx := t.Context()
	var mine []string
	for i := range 6 {
		s := spec
		s.Labels = map[string]string{"run": "mine"}
		if i == 5 {
			s.Labels["run"] = "other"
		}
		sb, err := p.Create(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		defer sb.Delete(context.WithoutCancel(ctx))
		if i < 5 {
			mine = append(mine, sb.ID())
		}
	}
	infos, err := p.List(ctx, map[string]string{"run": "mine"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range infos {
		got = append(got, in.ID)
		if in.Image != "busybox:1.36" || in.State != "started" || in.CreatedAt.IsZero() || in.ExpiresAt.IsZero() {
			t.Errorf("info %+v lacks image, state or times", in)
		}
	}
	slices.Sort(got)
	slices.Sort(mine)
	if !slices.Equal(got, mine) {
		t.Errorf("list = %v, want %v", got, mine)
	}
	if n := len(requestsTo(srv, http.MethodGet, "/api/sandbox")); n != 3 {
		t.Errorf("%d list requests for 5 sandboxes in pages of 2, want 3", n)
	}
}

// TestArgumentsStayLiteral: arguments, environment values and the working
// directory reach the program as they are, whatever shell syntax they hold.
func TestArgumentsStayLiteral(t *testing.T) {
	needCommands(t)
	_, _, sb := openSandbox(t, daytonatest.Options{})
	ctx := t.Context()
	dir := "/tmp/it's a $(dir)"
	if err := sb.MakeDir(ctx, dir); err != nil {
		t.Fatal(err)
	}
	args := []string{"$(touch /tmp/pwned)", "`touch /tmp/pwned`", "'; touch /tmp/pwned; '", "a\nb", `\" $HOME *`}
	res, err := sb.Run(ctx, sandbox.Command{
		Args: append([]string{"sh", "-c", `printf '%s|' "$@"; printf '%s|%s|' "$V" "$(pwd)"`, "sh"}, args...),
		Env:  map[string]string{"V": "$(touch /tmp/pwned) 'q' \"d\""},
		Dir:  dir,
	})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v, exit %d, stderr %q", err, res.ExitCode, res.Stderr)
	}
	want := strings.Join(args, "|") + "|" + "$(touch /tmp/pwned) 'q' \"d\"" + "|" + dir + "|"
	if string(res.Stdout) != want {
		t.Errorf("the program saw %q, want %q", res.Stdout, want)
	}
	if _, err := sb.Stat(ctx, "/tmp/pwned"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("an argument ran as shell code (/tmp/pwned: %v)", err)
	}
}

// TestUserIsTheSandboxUser: commands run as the sandbox's user; another
// user is refused rather than silently ignored.
func TestUserIsTheSandboxUser(t *testing.T) {
	srv := newServer(t, daytonatest.Options{})
	p := sandbox.NewProvider("daytona", openDriver(t, srv, nil))
	ctx := t.Context()
	s := spec
	s.User = "daytona"
	sb, err := p.Create(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	defer sb.Delete(context.WithoutCancel(ctx))
	_, err = sb.Exec(ctx, sandbox.Command{Args: []string{"true"}, User: "root"})
	if !errors.Is(err, errdefs.ErrNotSupported) || !strings.Contains(err.Error(), `"daytona"`) {
		t.Errorf("exec as another user: %v, want NotSupported naming the sandbox's user", err)
	}
}
