package modal_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/berth-sh/berth/providers/internal/transcript"
	"github.com/berth-sh/berth/providers/modal"
	"github.com/berth-sh/berth/sandbox"
)

// TestLiveTranscript runs one scenario on Modal and on modaltest, writes
// both transcripts of the control-plane calls (RPC, status, the names of
// the fields set; see -artifacts) and fails where they differ. The
// command router's calls (exec, files) are not observable from outside
// the SDK; the conformance suite covers them.
func TestLiveTranscript(t *testing.T) {
	r, env := liveRegistry(t)
	e, err := r.Lookup("modal")
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := e.Resolve(env)
	if err != nil {
		t.Fatal(err)
	}
	var live, fake transcript.Transcript
	runTranscript(t, &live, modal.Options{TokenID: secrets["MODAL_TOKEN_ID"].Reveal(), TokenSecret: secrets["MODAL_TOKEN_SECRET"].Reveal(),
		Environment: env.Get("MODAL_ENVIRONMENT")})
	srv := serve(t) // points the SDK at the fake from here on
	runTranscript(t, &fake, modal.Options{TokenID: srv.TokenID(), TokenSecret: srv.TokenSecret()})
	dir := t.ArtifactDir()
	for name, tr := range map[string]*transcript.Transcript{"modal": &live, "modaltest": &fake} {
		p := filepath.Join(dir, name+".transcript")
		if err := tr.WriteFile(p); err != nil {
			t.Fatal(err)
		}
		t.Logf("transcript of %s: %s", name, p)
	}
	if d := transcript.Diff(&live, &fake, retried); len(d) > 0 {
		t.Errorf("modal (first) and modaltest (second) differ:\n%s", strings.Join(d, "\n"))
	}
}

// TestTranscriptsAgree is the offline check of the comparison: two runs on
// the fake agree, and a throttled create, which the SDK waits out, is left
// out of the comparison rather than called a difference.
func TestTranscriptsAgree(t *testing.T) {
	srv := serve(t)
	var a, b transcript.Transcript
	runTranscript(t, &a, modal.Options{TokenID: srv.TokenID(), TokenSecret: srv.TokenSecret()})
	srv.Throttle("SandboxCreateV2", 1, 10*time.Millisecond)
	runTranscript(t, &b, modal.Options{TokenID: srv.TokenID(), TokenSecret: srv.TokenSecret()})
	if d := transcript.Diff(&a, &b, retried); len(d) != 0 {
		t.Fatalf("two runs on the fake differ:\n%s", strings.Join(d, "\n"))
	}
	throttled := false
	for _, e := range b.Entries() {
		throttled = throttled || (e.Method == "SandboxCreateV2" && e.Status == "ResourceExhausted")
	}
	if !throttled {
		t.Fatal("the throttled create is not in the second transcript")
	}
	if d := transcript.Diff(&a, &b, nil); len(d) == 0 {
		t.Fatal("without leaving throttles out, the runs should differ")
	}
	var sawCreate bool
	for _, e := range a.Entries() {
		sawCreate = sawCreate || (e.Method == "SandboxCreateV2" && e.Status == "OK" && len(e.Request) > 0 && len(e.Response) > 0)
		if strings.Contains(e.String(), srv.TokenSecret()) || strings.Contains(e.String(), "transcript-run") {
			t.Errorf("a value in the transcript: %s", e)
		}
	}
	if !sawCreate {
		t.Fatalf("no SandboxCreateV2 with its fields in %v", a.Entries())
	}
}

// retried leaves out throttles, which the SDK waits out and a run may or
// may not meet.
func retried(e transcript.Entry) bool {
	return e.Status == "ResourceExhausted" || e.Status == "Unavailable"
}

// runTranscript runs the scenario with the SDK's control-plane calls
// recorded.
func runTranscript(t *testing.T, tr *transcript.Transcript, opts modal.Options) {
	t.Helper()
	opts.UnaryInterceptors = []grpc.UnaryClientInterceptor{tr.UnaryInterceptor()}
	opts.StreamInterceptors = []grpc.StreamClientInterceptor{tr.StreamInterceptor()}
	d, err := modal.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	p := sandbox.NewProvider("modal", d)
	defer p.Close()
	ctx := t.Context()
	labels := map[string]string{"berth-transcript": "transcript-run"}
	spec := sandbox.Spec{Image: testImage, Labels: labels, TTL: 10 * time.Minute,
		Network: sandbox.Network{Mode: sandbox.NetworkAllowlist, Allow: []string{"192.0.2.0/24", "example.com"}}}
	// Modal caches built images and the fake starts empty: the build is a
	// warm-up, left out of the transcript.
	if err := p.PrepareImage(ctx, spec); err != nil {
		t.Fatal(err)
	}
	tr.Reset()
	sb, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if res, err := sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", "printf ok"}}); err != nil || string(res.Stdout) != "ok" {
		t.Fatalf("run: %q %v", res.Stdout, err)
	}
	if err := sb.WriteFile(ctx, "/tmp/kept.txt", []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := sb.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if infos, err := p.List(ctx, labels); err != nil || len(infos) != 1 {
		t.Fatalf("list: %v %v", infos, err)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	restored, err := p.Create(ctx, sandbox.Spec{Image: img, TTL: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	defer restored.Delete(ctx)
	if got, err := restored.ReadFile(ctx, "/tmp/kept.txt"); err != nil || string(got) != "kept" {
		t.Fatalf("restored: %q %v", got, err)
	}
}
