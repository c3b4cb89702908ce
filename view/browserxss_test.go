package view_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/berth-sh/berth/results/resultstest"
	"github.com/berth-sh/berth/view"
)

// TestBrowserXSS opens every page of a job whose task output, reward
// file, trajectory, names and samples are attacks, in a real browser: no
// attack runs (the guard's flags stay unset, no dialog, no console error,
// no CSP violation), and the attack text is on the page as text.
func TestBrowserXSS(t *testing.T) {
	b := newBrowser(t)
	// Control: on a page with no CSP and no escaping, the same attack
	// runs and the guard sees it, so a clean page below means something.
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<link rel=icon href=data:,>"+xssScript)
	}))
	defer bare.Close()
	b.do(chromedp.Navigate(bare.URL))
	if ran := eval[[]any](b, `window.__xssRan`); len(ran) != 1 {
		t.Fatalf("the guard did not see an attack run on an unprotected page: %v", ran)
	}
	b.mu.Lock()
	b.messages = nil
	b.mu.Unlock()

	jobs := t.TempDir()
	writeXSSJob(t, jobs)
	ts := newServer(t, jobs)
	trial := ts.URL + trialURL(xssJob, xssDirImg+"__1")
	for _, p := range []string{ts.URL + "/", ts.URL + jobURL(xssJob), trial, trial + "samples", ts.URL + trialURL(xssJob, xssDirURL+"__2"),
		ts.URL + jobURL(xssJob) + "?error=" + url.QueryEscape("VerifierOutputParseError<script>window.__xss=13</script>")} {
		b.do(chromedp.Navigate(p))
		b.clean(p)
	}
	// Hover over everything that could carry a handler, then look again.
	b.do(chromedp.Navigate(trial))
	eval[bool](b, `document.querySelectorAll("*").forEach(e => e.dispatchEvent(new MouseEvent("mouseover", {bubbles: true}))); true`)
	b.clean("after hovering")
	if got := b.text("pre.exception-message"); !strings.Contains(got, xssScript) || !strings.Contains(got, xssImg) {
		t.Errorf("exception shown as %q", got)
	}
	if got := b.text(".verifier-output pre"); got != xssAll+"\n" {
		t.Errorf("verifier output shown as %q", got)
	}
	if got := b.text(".reward-file pre"); got != xssAll+"\n" {
		t.Errorf("reward file shown as %q", got)
	}
	if got := b.text("article.step pre.command"); got != "$ echo '<script>window.__xss=11</script>'" {
		t.Errorf("command shown as %q", got)
	}
	if n := eval[int](b, `document.querySelectorAll("script").length`); n != 1 {
		t.Errorf("%d script elements", n)
	}
	// The samples page shows a token that is markup as text.
	b.do(chromedp.Navigate(trial + "samples"))
	if got := eval[bool](b, `Array.from(document.querySelectorAll(".tokens .tok")).some(e => e.textContent === "<script>window.__xss=1</script>")`); !got {
		t.Error("the markup token is not shown as text")
	}
	b.clean("samples")

	// The report of the same job, from a file.
	out := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := view.Report(b.ctx, f, filepath.Join(jobs, xssJob), view.ReportOptions{}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b.do(chromedp.Navigate("file://" + out))
	eval[bool](b, `document.querySelectorAll("*").forEach(e => e.dispatchEvent(new MouseEvent("mouseover", {bubbles: true}))); true`)
	b.clean("report")
	if n := eval[int](b, `document.querySelectorAll("script").length`); n != 0 {
		t.Errorf("report: %d script elements", n)
	}
}

// TestBrowserLive: a running job's page shows a trial that finishes while
// it is open, without a reload, and stops polling once the job finishes.
func TestBrowserLive(t *testing.T) {
	b := newBrowser(t)
	jobs := t.TempDir()
	dir := resultstest.Job(t, jobs, "live", false, time.Now().UTC(), []resultstest.Trial{
		{Task: "a", Rewards: resultstest.Reward(1)},
		{Task: "b", Name: "b__1", Running: true, TrialLog: "2026-01-01T00:00:00Z agent_execution: start\n"},
	})
	ts := newServer(t, jobs)
	b.do(chromedp.Navigate(ts.URL + jobURL("live")))
	b.waitRows(2)
	if got := b.text("#count-done"); got != "1" {
		t.Fatalf("done = %q", got)
	}
	eval[bool](b, `window.__noReload = true`)
	// The running trial finishes and a new one lands; result.json moves on.
	resultstest.WriteTrial(t, dir, 1, resultstest.Trial{Task: "b", Name: "b__1", Rewards: resultstest.Reward(0)})
	resultstest.WriteTrial(t, dir, 2, resultstest.Trial{Task: "c", Rewards: resultstest.Reward(1)})
	b.wait(`document.querySelectorAll("#trials tbody tr.trial").length === 3 && document.querySelector("#count-done").textContent === "3"`)
	if !eval[bool](b, `window.__noReload === true`) {
		t.Error("the page reloaded")
	}
	// The job finishes: the page says so and polling stops.
	resultstest.Job(t, jobs, "live", true, time.Now().UTC(), nil)
	b.wait(`document.querySelector(".badge").textContent === "finished"`)
	b.clean("live")
}
