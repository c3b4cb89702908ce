package view_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/results"
	"github.com/berth-sh/berth/results/resultstest"
	"github.com/berth-sh/berth/view"
)

func newServer(t testing.TB, dirs ...string) *httptest.Server {
	t.Helper()
	lib, err := results.Open(dirs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lib.Close() })
	s, err := view.New(lib, view.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts
}

func get(t *testing.T, ts *httptest.Server, path string) (*http.Response, string) {
	t.Helper()
	res, err := ts.Client().Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

func jobURL(name string) string { return "/jobs/0/" + url.PathEscape(name) + "/" }

func trialURL(job, trial string) string { return jobURL(job) + "trials/" + url.PathEscape(trial) + "/" }

// TestXSSEscaped: every page that shows what a task wrote shows it as
// text. The only script element on any page is the viewer's own file,
// no attribute carries a handler or a javascript: URL, and the attack
// text is there, escaped.
func TestXSSEscaped(t *testing.T) {
	jobs := t.TempDir()
	writeXSSJob(t, jobs)
	resultstest.Job(t, jobs, "other", true, time.Time{}, []resultstest.Trial{{Task: xssAll, Rewards: resultstest.Reward(1)}})
	ts := newServer(t, jobs)
	pages := []string{
		"/", jobURL(xssJob), jobURL(xssJob) + "?error=" + url.QueryEscape("VerifierOutputParseError<script>window.__xss=13</script>"),
		jobURL(xssJob) + "?task=" + url.QueryEscape(xssAll) + "&sort=" + url.QueryEscape(xssQuote),
		trialURL(xssJob, xssDirImg+"__1"), trialURL(xssJob, xssDirURL+"__2"),
		trialURL(xssJob, xssDirImg+"__1") + "samples", trialURL(xssJob, xssDirImg+"__1") + "samples?s=" + url.QueryEscape(xssQuote),
		"/compare?a=" + url.QueryEscape("0/"+xssJob) + "&b=0/other",
	}
	for _, p := range pages {
		res, body := get(t, ts, p)
		if res.StatusCode != http.StatusOK {
			t.Errorf("%s: %d\n%s", p, res.StatusCode, body)
			continue
		}
		checkDOM(t, p, body, []string{"/static/live.js"})
	}
	// The attacks are shown, as text.
	_, body := get(t, ts, trialURL(xssJob, xssDirImg+"__1"))
	for _, want := range []string{"&lt;script&gt;window.__xss=1&lt;/script&gt;", "&lt;img src=x onerror=&#34;window.__xss=2&#34;&gt;",
		"javascript:window.__xss=3", "&lt;b&gt;bash&lt;/b&gt;", "&lt;script&gt;window.__xss=8&lt;/script&gt;"} {
		if !strings.Contains(body, want) {
			t.Errorf("trial page lacks %q", want)
		}
	}
	// The raw view is text, under a sandbox CSP.
	res, raw := get(t, ts, trialURL(xssJob, xssDirImg+"__1")+"files/agent/oracle.txt")
	if res.StatusCode != 200 || raw != xssAll+"\n" || res.Header.Get("Content-Type") != "text/plain; charset=utf-8" ||
		!strings.Contains(res.Header.Get("Content-Security-Policy"), "sandbox") || res.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("raw file: %d %q %v", res.StatusCode, raw, res.Header)
	}
}

// TestSecurityHeaders: every answer carries the CSP and friends; only GET
// and HEAD are served; a Host that is not local is refused.
func TestSecurityHeaders(t *testing.T) {
	jobs := t.TempDir()
	resultstest.Job(t, jobs, "j", true, time.Time{}, []resultstest.Trial{{Task: "a", Rewards: resultstest.Reward(1)}})
	ts := newServer(t, jobs)
	for _, p := range []string{"/", jobURL("j"), jobURL("j") + "charts/reward.svg", "/static/view.css", "/static/live.js", "/api/jobs", "/nope", jobURL("nope")} {
		res, _ := get(t, ts, p)
		h := res.Header
		if h.Get("Content-Security-Policy") == "" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: headers %v", p, h)
		}
		if csp := h.Get("Content-Security-Policy"); strings.Contains(csp, "unsafe") {
			t.Errorf("%s: CSP %q", p, csp)
		}
	}
	if csp := view.CSP; !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP = %q", csp)
	}
	res, err := ts.Client().Post(ts.URL+"/", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", res.StatusCode)
	}
	for host, want := range map[string]int{"evil.example": 421, "evil.example:80": 421, "localhost:1": 200, "127.0.0.1": 200, "[::1]:8321": 200} {
		req, _ := http.NewRequest("GET", ts.URL+"/", nil)
		req.Host = host
		res, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, res.StatusCode, want)
		}
	}
}

// TestRouteTraversal: route parameters cannot reach outside the jobs
// directory, whatever their encoding.
func TestRouteTraversal(t *testing.T) {
	jobs := t.TempDir()
	dir := resultstest.Job(t, jobs, "j", true, time.Time{}, []resultstest.Trial{{Task: "a", Name: "a__1", Rewards: resultstest.Reward(1),
		Files: map[string]string{"agent/oracle.txt": "fine\n"}}})
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("host secret"), 0o600)
	os.Symlink(secret, filepath.Join(dir, "a__1", "agent", "link.txt"))
	ts := newServer(t, jobs)
	for _, p := range []string{
		"/jobs/0/..%2F..%2Fetc/", "/jobs/0/%2E%2E/", "/jobs/9/j/", "/jobs/-1/j/", "/jobs/x/j/",
		"/jobs/0/j/trials/..%2F..%2F..%2Fetc/", "/jobs/0/j/trials/%2E%2E/files/etc/passwd",
		"/jobs/0/j/trials/a__1/files/..%2F..%2F..%2F..%2Fetc%2Fpasswd", "/jobs/0/j/trials/a__1/files/agent/link.txt",
		"/jobs/0/j/trials/a__1/files/%2Fetc%2Fpasswd", "/jobs/0/j/trials/a__1/files/agent%2F..%2F..%2Fconfig.json",
		"/jobs/0/j/charts/..%2F..%2Fetc.svg", "/compare?a=0/..&b=0/j",
	} {
		res, body := get(t, ts, p)
		if res.StatusCode == 200 || strings.Contains(body, "host secret") || strings.Contains(body, "root:x:") {
			t.Errorf("%s: %d %q", p, res.StatusCode, body[:min(len(body), 200)])
		}
	}
	if res, body := get(t, ts, "/jobs/0/j/trials/a__1/files/agent/oracle.txt"); res.StatusCode != 200 || body != "fine\n" {
		t.Errorf("plain file: %d %q", res.StatusCode, body)
	}
}

// rowsOf returns the trial names of the trials table, in order.
func rowsOf(body string) []string {
	re := regexp.MustCompile(`<tr class="trial [a-z]+" data-trial="([^"]*)"`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestSortFilterPage: sorting, filtering and paging are query parameters.
func TestSortFilterPage(t *testing.T) {
	jobs := t.TempDir()
	var trials []resultstest.Trial
	for i := range 120 {
		tr := resultstest.Trial{Task: "t" + string(rune('a'+i%26)), Attempt: i/26 + 1, Rewards: resultstest.Reward(float64(i%10) / 10)}
		if i%7 == 0 {
			tr.Error, tr.Rewards = "AgentTimeoutError", nil
		}
		trials = append(trials, tr)
	}
	resultstest.Job(t, jobs, "j", true, time.Time{}, trials)
	ts := newServer(t, jobs)
	_, body := get(t, ts, jobURL("j"))
	if rows := rowsOf(body); len(rows) != 50 || !strings.Contains(body, "trials 1–50 of 120") {
		t.Fatalf("first page: %d rows", len(rows))
	}
	_, body = get(t, ts, jobURL("j")+"?page=3")
	if rows := rowsOf(body); len(rows) != 20 || !strings.Contains(body, "trials 101–120 of 120") {
		t.Errorf("last page: %d rows", len(rows))
	}
	_, body = get(t, ts, jobURL("j")+"?sort=reward&dir=desc&per=500")
	re := regexp.MustCompile(`data-reward="([0-9.]+)"`)
	prev := 2.0
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		var v float64
		if _, err := fmtSscan(m[1], &v); err != nil || v > prev {
			t.Fatalf("rewards not descending at %s", m[1])
		}
		prev = v
	}
	_, body = get(t, ts, jobURL("j")+"?error=AgentTimeoutError&per=500")
	rows := rowsOf(body)
	if len(rows) != 18 {
		t.Errorf("AgentTimeoutError rows = %d, want 18", len(rows))
	}
	if strings.Count(body, `data-error="AgentTimeoutError"`) != 18 {
		t.Errorf("a filtered row has another error type")
	}
	_, body = get(t, ts, jobURL("j")+"?task=tb&outcome=fail&per=500")
	for _, r := range rowsOf(body) {
		if !strings.HasPrefix(r, "tb__") {
			t.Errorf("task filter let %s through", r)
		}
	}
}

func TestChartsAndLive(t *testing.T) {
	jobs := t.TempDir()
	dir := resultstest.Job(t, jobs, "live", false, time.Now().UTC(), []resultstest.Trial{{Task: "a", Rewards: resultstest.Reward(1)}})
	ts := newServer(t, jobs)
	res, svg := get(t, ts, jobURL("live")+"charts/agent_execution.svg")
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "image/svg+xml" || !strings.Contains(svg, "<svg") || !strings.Contains(svg, "p95 2.00s") {
		t.Fatalf("chart: %d %s", res.StatusCode, svg[:min(len(svg), 300)])
	}
	if res, _ := get(t, ts, jobURL("live")+"charts/nope.svg"); res.StatusCode != 404 {
		t.Errorf("unknown chart: %d", res.StatusCode)
	}
	_, page := get(t, ts, jobURL("live"))
	if !strings.Contains(page, `<main data-live="/api/jobs/0/live">`) {
		t.Errorf("a running job's page does not poll")
	}
	_, before := get(t, ts, "/api/jobs/0/live")
	resultstest.WriteTrial(t, dir, 1, resultstest.Trial{Task: "b", Rewards: resultstest.Reward(0)})
	_, after := get(t, ts, "/api/jobs/0/live")
	if before == after || !strings.Contains(after, `"live":true`) || !strings.Contains(after, `"done":2`) {
		t.Errorf("pulse before %s after %s", before, after)
	}
}

func TestReportFile(t *testing.T) {
	jobs := t.TempDir()
	dir := writeXSSJob(t, jobs)
	var b strings.Builder
	if err := view.Report(context.Background(), &b, dir, view.ReportOptions{}); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, bad := range []string{"<script", "<img src=x", "http://", "https://", `<link rel="stylesheet"`} {
		if strings.Contains(html, bad) {
			t.Errorf("report contains %q", bad)
		}
	}
	if !strings.Contains(html, `http-equiv="Content-Security-Policy" content="default-src &#39;none&#39;; style-src &#39;sha256-`) {
		t.Errorf("report has no CSP meta")
	}
	checkDOM(t, "report", html, nil)
	if strings.Count(html, `<section class="trial"`) != 3 || strings.Count(html, `src="data:image/svg&#43;xml;base64,`) < 2 {
		t.Errorf("report sections or charts missing")
	}
	if err := view.Report(context.Background(), &b, jobs, view.ReportOptions{}); err != nil {
		// jobs holds one job: a jobs directory of one job is fine too.
		t.Errorf("jobs dir with one job: %v", err)
	}
}

// TestSamplesPage: tokens as text (or ids), loss-masked spans marked,
// logprobs in each token's title, turn boundaries, the TITO counters with
// a non-zero one flagged, and the truncation status.
func TestSamplesPage(t *testing.T) {
	jobs := t.TempDir()
	writeXSSJob(t, jobs)
	ts := newServer(t, jobs)
	base := trialURL(xssJob, xssDirImg+"__1") + "samples"
	_, body := get(t, ts, base+"?s=0")
	for _, want := range []string{
		`<span class="run prompt"><span class="tok" title="#0 id 151644 · logprob none">&lt;|im_start|&gt;</span>`,
		`<span class="run loss"><span class="tok" title="#9 id 9707 · logprob -0.1100 (p=0.896) · loss">Hello</span>`,
		`<span class="turn" data-turn="2">turn 2</span><span class="run obs">`,
		`&lt;script&gt;window.__xss=1&lt;/script&gt;</span>`,
		`<tr class="" data-counter="special_token_type"><td>special_token_type</td><td class="n">0</td></tr>`,
		`24 (9 prompt, 15 response, <span class="loss-count">5</span> with loss)`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("sample 0 lacks %s", want)
		}
	}
	if !strings.Contains(body, "line 2: not a sample") {
		t.Error("the bad line is not reported")
	}
	_, body = get(t, ts, base+"?s=1")
	for _, want := range []string{
		`<tr class="bad" data-counter="special_token_type"><td>special_token_type</td><td class="n">2</td></tr>`,
		`TRUNCATED <span class="warn">(cut at max length)</span>`,
		`<span class="tok" title="#3 id 4 · logprob -0.5000 (p=0.607) · loss">[4]</span>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("sample 1 lacks %s", want)
		}
	}
	_, body = get(t, ts, base+"?s=2")
	if !strings.Contains(body, "loss_mask has 3 entries for 2 tokens") || !strings.Contains(body, "ABORTED") {
		t.Error("sample 2's problems are not shown")
	}
}
