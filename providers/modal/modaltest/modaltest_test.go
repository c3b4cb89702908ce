package modaltest_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	sdk "github.com/modal-labs/modal-client/go"
	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/berth-sh/berth/providers/modal/modaltest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// client is an SDK client pointed at srv through the process environment,
// as the SDK reads it.
func client(t *testing.T, srv *modaltest.Server, secret string) *sdk.Client {
	t.Helper()
	srv.PointSDK(t)
	c, err := sdk.NewClientWithOptions(&sdk.ClientParams{TokenID: srv.TokenID(), TokenSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// newSandbox creates a sandbox in app "t" that is terminated when the test
// ends.
func newSandbox(t *testing.T, c *sdk.Client, params *sdk.SandboxCreateParams) *sdk.Sandbox {
	t.Helper()
	ctx := t.Context()
	app, err := c.Apps.FromName(ctx, "t", &sdk.AppFromNameParams{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.Sandboxes.Create(ctx, app, c.Images.FromRegistry("alpine:3", nil), params)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = sb.Terminate(context.Background(), nil)
		_ = sb.Detach()
	})
	return sb
}

// A wrong secret is refused, and the refusal does not repeat it.
func TestAuthRefusesWrongToken(t *testing.T) {
	srv := modaltest.New(t, modaltest.Options{})
	c := client(t, srv, "as-not-the-secret")
	_, err := c.Apps.FromName(t.Context(), "t", &sdk.AppFromNameParams{CreateIfMissing: true})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("wrong token: %v; want Unauthenticated", err)
	}
	if strings.Contains(err.Error(), "as-not-the-secret") {
		t.Errorf("the refusal repeats the secret: %v", err)
	}
}

// The command router takes only the bearer token issued for the task.
func TestRouterRefusesForeignBearer(t *testing.T) {
	srv := modaltest.New(t, modaltest.Options{})
	c := client(t, srv, srv.TokenSecret())
	sb := newSandbox(t, c, nil)
	cp, err := sb.Exec(t.Context(), []string{"true"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := cp.Wait(t.Context(), nil); code != 0 || err != nil {
		t.Fatalf("exec with the issued token: %d, %v", code, err)
	}
	conn, err := grpc.NewClient(strings.TrimPrefix(srv.URL(), "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer forged.token.here")
	_, err = pb.NewTaskCommandRouterClient(conn).TaskExecStart(ctx, pb.TaskExecStartRequest_builder{
		TaskId: taskOf(t, srv, sb.SandboxID), ExecId: "e1", CommandArgs: []string{"true"},
	}.Build())
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("exec with a forged bearer: %v; want Unauthenticated", err)
	}
}

// taskOf reads a sandbox's task ID as any client may: through the control
// plane with the token pair and an auth token.
func taskOf(t *testing.T, srv *modaltest.Server, id string) string {
	t.Helper()
	conn, err := grpc.NewClient(strings.TrimPrefix(srv.URL(), "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cp := pb.NewModalClientClient(conn)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "x-modal-token-id", srv.TokenID(), "x-modal-token-secret", srv.TokenSecret())
	tok, err := cp.AuthTokenGet(ctx, &pb.AuthTokenGetRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ctx = metadata.AppendToOutgoingContext(ctx, "x-modal-auth-token", tok.GetToken())
	resp, err := cp.SandboxGetTaskIdV2(ctx, pb.SandboxGetTaskIdRequest_builder{SandboxId: id}.Build())
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetTaskId()
}

// The file tool resolves paths as inside the sandbox: a symlink a command
// made to "/" leads a file call to the sandbox's own "/", never the
// host's (fakeengine's TestSymlinksResolveInside).
func TestFileToolStaysInTree(t *testing.T) {
	srv := modaltest.New(t, modaltest.Options{})
	c := client(t, srv, srv.TokenSecret())
	sb := newSandbox(t, c, nil)
	ctx := t.Context()
	cp, err := sb.Exec(ctx, []string{"ln", "-s", "/", "host"}, &sdk.SandboxExecParams{Workdir: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := cp.Wait(ctx, nil); code != 0 || err != nil {
		t.Fatalf("ln: %d, %v", code, err)
	}
	if b, err := sb.Filesystem.ReadBytes(ctx, "/tmp/host/etc/passwd", nil); err == nil {
		t.Fatalf("read the host's /etc/passwd through a sandbox symlink: %d bytes", len(b))
	}
	escape := "modaltest-escape-" + sb.SandboxID
	if err := sb.Filesystem.WriteBytes(ctx, []byte("x"), "/tmp/host/tmp/"+escape, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/tmp/" + escape); err == nil {
		os.Remove("/tmp/" + escape)
		t.Fatal("wrote through a sandbox symlink to the host")
	}
	files, err := sb.Filesystem.ListFiles(ctx, "/tmp/host/tmp", nil)
	if err != nil || len(files) != 2 { // host (the link) and the file
		t.Fatalf("listing the sandbox's /tmp through the link = %+v, %v; want the link and the file", files, err)
	}
	// The link itself is described, not followed.
	fi, err := sb.Filesystem.Stat(ctx, "/tmp/host", nil)
	if err != nil || fi.Type != sdk.FileTypeSymlink || fi.SymlinkTarget == nil || *fi.SymlinkTarget != "/" {
		t.Errorf("stat of the link = %+v, %v", fi, err)
	}
}

// A sandbox ends at its timeout with status TIMEOUT, which the SDK reports
// as exit 124, and stays queryable.
func TestSandboxTimeout(t *testing.T) {
	srv := modaltest.New(t, modaltest.Options{})
	c := client(t, srv, srv.TokenSecret())
	sb := newSandbox(t, c, &sdk.SandboxCreateParams{Timeout: time.Second})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	code, err := sb.Wait(ctx, nil)
	if err != nil || code != 124 {
		t.Fatalf("wait = %d, %v; want 124", code, err)
	}
	if st, _ := srv.Sandbox(sb.SandboxID); st.Result.GetStatus() != pb.GenericResult_GENERIC_STATUS_TIMEOUT {
		t.Errorf("result %v, want TIMEOUT", st.Result)
	}
}

// SandboxListV2 pages by creation time; the SDK follows the pages and sees
// every sandbox once, and only the running ones that carry the tags.
func TestListPages(t *testing.T) {
	srv := modaltest.New(t, modaltest.Options{})
	c := client(t, srv, srv.TokenSecret())
	const n = 45
	want := map[string]bool{}
	for i := range n {
		sb := newSandbox(t, c, &sdk.SandboxCreateParams{Tags: map[string]string{"batch": "b1"}})
		if i%2 == 0 {
			want[sb.SandboxID] = true
		} else if _, err := sb.Terminate(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
	}
	newSandbox(t, c, &sdk.SandboxCreateParams{Tags: map[string]string{"batch": "other"}})
	app, err := c.Apps.FromName(t.Context(), "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := c.Sandboxes.List(t.Context(), &sdk.SandboxListParams{AppID: app.AppID, Tags: map[string]string{"batch": "b1"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for sb, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		if got[sb.SandboxID] {
			t.Errorf("%s listed twice", sb.SandboxID)
		}
		got[sb.SandboxID] = true
		_ = sb.Detach()
	}
	if len(got) != len(want) {
		t.Errorf("listed %d sandboxes, want the %d running ones tagged b1", len(got), len(want))
	}
	for id := range want {
		if !got[id] {
			t.Errorf("%s missing from the list", id)
		}
	}
	if calls := len(srv.Calls("SandboxListV2")); calls < 2 {
		t.Errorf("%d list calls; the answer was not paged", calls)
	}
}
