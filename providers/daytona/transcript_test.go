package daytona_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/builtin"
	"github.com/berth-sh/berth/providers/daytona"
	"github.com/berth-sh/berth/providers/daytona/daytonatest"
	"github.com/berth-sh/berth/providers/internal/transcript"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
)

// liveKey returns the Daytona key of the environment, or skips with the
// registry entry's provision hint.
func liveKey(t *testing.T) string {
	t.Helper()
	key := os.Getenv("DAYTONA_API_KEY")
	if key == "" {
		for _, e := range builtin.Entries() {
			if e.Name == "daytona" {
				t.Skipf("DAYTONA_API_KEY is not set; provision a key with: %s", e.Credential.ProvisionHint)
			}
		}
		t.Skip("DAYTONA_API_KEY is not set")
	}
	return key
}

// TestLiveTranscript runs one scenario against Daytona itself and against
// daytonatest, writes both transcripts (method, route, status, field
// names; see -artifacts) and fails where they differ: a call, a status or
// a field the fake answers otherwise than the service.
func TestLiveTranscript(t *testing.T) {
	key := liveKey(t)
	needCommands(t)
	image := os.Getenv("DAYTONA_TEST_IMAGE")
	if image == "" {
		image = "debian:bookworm-slim"
	}
	var live, fake transcript.Transcript
	runTranscript(t, &live, daytona.Options{APIKey: registry.Secret(key), BaseURL: os.Getenv("DAYTONA_API_URL"), Target: os.Getenv("DAYTONA_TARGET")}, image)
	srv := newServer(t, daytonatest.Options{})
	runTranscript(t, &fake, daytona.Options{APIKey: registry.Secret(srv.APIKey()), BaseURL: srv.URL()}, image)
	compareTranscripts(t, &live, &fake, "daytona", "daytonatest")
}

// TestTranscriptsAgree is the offline check of the comparison itself: two
// fakes give one transcript, and a fake that answers one call otherwise
// (a delete of a running sandbox refused, as older servers did) shows.
func TestTranscriptsAgree(t *testing.T) {
	needCommands(t)
	var a, b, c transcript.Transcript
	for _, run := range []struct {
		tr   *transcript.Transcript
		opts daytonatest.Options
	}{{&a, daytonatest.Options{}}, {&b, daytonatest.Options{}}, {&c, daytonatest.Options{RefuseDeleteStarted: true}}} {
		srv := newServer(t, run.opts)
		runTranscript(t, run.tr, daytona.Options{APIKey: registry.Secret(srv.APIKey()), BaseURL: srv.URL()}, "busybox:1.36")
	}
	if d := transcript.Diff(&a, &b, retried); len(d) != 0 {
		t.Fatalf("two runs on fakes differ:\n%s", strings.Join(d, "\n"))
	}
	d := transcript.Diff(&a, &c, retried)
	if !strings.Contains(strings.Join(d, "\n"), "only in the second: DELETE /sandbox/{id} 400") {
		t.Fatalf("a refused delete did not show: %q", d)
	}
	for _, e := range a.Entries() {
		if strings.Contains(e.String(), "berth-transcript") || regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}`).MatchString(e.Route) {
			t.Errorf("a value in the transcript: %s", e)
		}
	}
}

// runTranscript runs the scenario with the driver's HTTP traffic recorded.
func runTranscript(t *testing.T, tr *transcript.Transcript, opts daytona.Options, image string) {
	t.Helper()
	base := opts.BaseURL
	if base == "" {
		base = daytona.DefaultBaseURL
	}
	api, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil {
		t.Fatal(err)
	}
	opts.HTTPClient = &http.Client{Transport: tr.Transport(http.DefaultTransport.(*http.Transport).Clone(), route(api), "labels", "env", "envs")}
	d, err := daytona.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	p := sandbox.NewProvider("daytona", d)
	defer p.Close()
	transcriptScenario(t, p, image)
}

// transcriptScenario is what both runs do: the calls of a trial.
func transcriptScenario(t *testing.T, p *sandbox.Provider, image string) {
	t.Helper()
	ctx := t.Context()
	labels := map[string]string{"berth-transcript": randomLabel()}
	sb, err := p.Create(ctx, sandbox.Spec{Image: image, Labels: labels, TTL: 20 * time.Minute,
		Resources: sandbox.Resources{CPUs: 1, MemoryMB: 1024, StorageMB: 3072}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	// The cleanup of a failed run only: after the scenario's own delete, a
	// second one would GET a sandbox the server is still removing, 200 or
	// 404 as its timing falls, and the transcripts of two equal runs would
	// differ.
	deleted := false
	defer func() {
		if !deleted {
			_ = sb.Delete(context.WithoutCancel(ctx))
		}
	}()
	res, err := sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", "cat; echo err >&2; exit 3"}, Stdin: strings.NewReader("in\n")})
	if err != nil || res.ExitCode != 3 || string(res.Stdout) != "in\n" || string(res.Stderr) != "err\n" {
		t.Fatalf("run: %+v %v", res, err)
	}
	if err := sb.WriteFile(ctx, "/tmp/transcript/a.txt", []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := sb.ReadFile(ctx, "/tmp/transcript/a.txt"); err != nil || string(got) != "a" {
		t.Fatalf("read: %q %v", got, err)
	}
	if _, err := sb.Stat(ctx, "/tmp/transcript/a.txt"); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.ListDir(ctx, "/tmp/transcript"); err != nil {
		t.Fatal(err)
	}
	if err := sb.Remove(ctx, "/tmp/transcript"); err != nil {
		t.Fatal(err)
	}
	if err := sb.SetTimeout(ctx, 30*time.Minute); err != nil {
		t.Fatal(err)
	}
	if infos, err := p.List(ctx, labels); err != nil || len(infos) != 1 {
		t.Fatalf("list: %v %v", infos, err)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	deleted = true
}

// compareTranscripts writes both transcripts and fails on a difference.
func compareTranscripts(t *testing.T, live, fake *transcript.Transcript, liveName, fakeName string) {
	t.Helper()
	dir := t.ArtifactDir()
	for name, tr := range map[string]*transcript.Transcript{liveName: live, fakeName: fake} {
		p := filepath.Join(dir, name+".transcript")
		if err := tr.WriteFile(p); err != nil {
			t.Fatal(err)
		}
		t.Logf("transcript of %s: %s", name, p)
	}
	if d := transcript.Diff(live, fake, retried); len(d) > 0 {
		t.Errorf("%s (first) and %s (second) differ:\n%s", liveName, fakeName, strings.Join(d, "\n"))
	}
}

// retried leaves out throttles and server hiccups, which the client
// retries and a run may or may not meet.
func retried(e transcript.Entry) bool {
	return e.Status == "429" || e.Status == "502" || e.Status == "503" || e.Status == "504" || e.Status == "error"
}

var (
	uuidSeg = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	numSeg  = regexp.MustCompile(`^[0-9]+$`)
)

// route names a request of the driver: the API's path below its base, or
// "{toolbox}" and the toolbox's path below the sandbox's ID, with IDs,
// berth's names and numbers as placeholders.
func route(api *url.URL) func(*http.Request) string {
	return func(r *http.Request) string {
		segs := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
		prefix := ""
		if r.URL.Host == api.Host && strings.HasPrefix(r.URL.Path, api.Path+"/") {
			segs = strings.Split(strings.TrimPrefix(r.URL.Path, api.Path+"/"), "/")
		} else {
			prefix = "{toolbox}"
			for i, s := range segs {
				if uuidSeg.MatchString(s) {
					segs = segs[i+1:]
					break
				}
			}
		}
		for i, s := range segs {
			switch {
			case uuidSeg.MatchString(s):
				segs[i] = "{id}"
			case strings.HasPrefix(s, "berth-"):
				segs[i] = "{name}"
			case numSeg.MatchString(s):
				segs[i] = "{n}"
			}
		}
		return prefix + "/" + strings.Join(segs, "/")
	}
}

func randomLabel() string { return time.Now().Format("150405.000000") }
