package view_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/berth-sh/berth/view"
)

// TestBrowserRealJob: a job of 50 trials made by `berth run` on the local
// provider, with failures of every type a task can cause, in a real
// browser: the jobs list, the job page, sorting by reward, filtering by
// error type, a trial's trajectory and verifier output, the attack
// trials, and the report of the same job opened from a file with the
// network off. Screenshots go to the test's artifacts.
func TestBrowserRealJob(t *testing.T) {
	chromiumPath(t)
	jobs := runFixtureJob(t)
	b := newBrowser(t)
	ts := newServer(t, jobs)

	// The jobs list.
	b.do(chromedp.Navigate(ts.URL + "/"))
	row := b.text(`tr[data-job="0/fixture"]`)
	for _, want := range []string{"fixture", "finished", "oracle", "local", "50/50", "AgentTimeoutError 2", "VerifierTimeoutError 2",
		"RewardFileNotFoundError 2", "RewardFileEmptyError 2", "VerifierOutputParseError 4", "EnvironmentError 2",
		"EnvironmentStartTimeoutError 2", "AgentError 2", "InvalidTaskError 2"} {
		if !strings.Contains(row, want) {
			t.Errorf("jobs row lacks %q: %s", want, row)
		}
	}
	b.shot("jobs.png")
	b.clean("jobs")

	// The job page: 50 rows on the first page, the charts drawn.
	b.follow(`tr[data-job="0/fixture"] a`)
	b.waitRows(50)
	serverMean := b.text("#mean-reward")
	if !eval[bool](b, `Array.from(document.querySelectorAll(".charts img")).every(i => i.complete && i.naturalWidth > 0)`) {
		b.wait(`Array.from(document.querySelectorAll(".charts img")).every(i => i.complete && i.naturalWidth > 0)`)
	}
	if n := eval[int](b, `document.querySelectorAll(".charts img").length`); n < 5 {
		t.Errorf("%d charts", n)
	}
	if p95 := b.text("#phases"); !strings.Contains(p95, "agent_execution") {
		t.Errorf("phase table: %s", p95)
	}
	b.shot("job.png")
	b.clean("job page")

	// Sort by reward: a click on the header, highest first.
	b.follow(`a[data-sort="reward"]`)
	b.wait(`location.search.includes("sort=reward")`)
	b.waitRows(50)
	rewards := rows(b, "data-reward")
	vals := make([]float64, len(rewards))
	for i, r := range rewards {
		vals[i], _ = strconv.ParseFloat(r, 64)
	}
	if !slices.IsSortedFunc(vals, func(a, b float64) int { return int(b*100 - a*100) }) || vals[0] != 1 || vals[len(vals)-1] != 0 {
		t.Errorf("rewards after sorting: %v", vals)
	}
	if got := eval[string](b, `document.querySelector('th[aria-sort="descending"] a').dataset.sort`); got != "reward" {
		t.Errorf("descending column = %q", got)
	}

	// Filter by error type with the form.
	b.do(chromedp.SetValue(chromedp.CSS("#filter-error"), "AgentTimeoutError"))
	b.follow("#apply")
	b.wait(`location.search.includes("error=AgentTimeoutError")`)
	b.waitRows(2)
	for _, e := range rows(b, "data-error") {
		if e != "AgentTimeoutError" {
			t.Errorf("filtered row with error %q", e)
		}
	}
	b.clean("sorted and filtered")

	// Open a trial with a trajectory: its turns, command, output, the
	// verifier's output and the reward file.
	b.do(chromedp.Navigate(ts.URL + jobURL("fixture") + "?task=hello-trajectory"))
	b.waitRows(2)
	b.follow("#trials tbody tr.trial td.name a")
	if n := eval[int](b, `document.querySelectorAll("article.step").length`); n != 4 {
		t.Errorf("%d trajectory steps, want 4", n)
	}
	if got := b.text("article.step.agent pre.command"); got != "$ echo 42 > /tmp/answer && cat /tmp/answer" {
		t.Errorf("command = %q", got)
	}
	if got := b.text("article.step.agent pre.output"); got != "42\n" {
		t.Errorf("output = %q", got)
	}
	if got := b.text(".verifier-output pre"); got != "checking /tmp/answer\nPASS\n" {
		t.Errorf("verifier output = %q", got)
	}
	if got := b.text(".reward-file pre"); got != "1\n" {
		t.Errorf("reward file = %q", got)
	}
	if n := eval[int](b, `document.querySelectorAll("svg.timeline rect").length`); n < 5 {
		t.Errorf("timeline has %d bars", n)
	}
	eval[bool](b, `document.querySelector("#trajectory").scrollIntoView({block: "start"}); true`)
	b.shot("trajectory.png")
	b.clean("trial page")

	// An oracle trial that failed: the solution's output and the typed
	// exception are shown.
	b.do(chromedp.Navigate(ts.URL + jobURL("fixture") + "?task=agent-timeout"))
	b.waitRows(2)
	b.follow("#trials tbody tr.trial td.name a")
	if got := b.text(".exception-type"); got != "AgentTimeoutError" {
		t.Errorf("exception type = %q", got)
	}

	// The attack trials made by the real run: nothing runs, text shows.
	for _, task := range []string{"xss-", "javascript:"} {
		b.do(chromedp.Navigate(ts.URL + jobURL("fixture") + "?task=" + task))
		b.waitRows(2)
		b.follow("#trials tbody tr.trial td.name a")
		eval[bool](b, `document.querySelectorAll("*").forEach(e => e.dispatchEvent(new MouseEvent("mouseover", {bubbles: true}))); true`)
		b.clean("attack trial " + task)
		if n := eval[int](b, `document.querySelectorAll("script").length`); n != 1 {
			t.Errorf("%s: %d script elements", task, n)
		}
	}
	if got := b.text(".reward-file pre"); !strings.Contains(got, "<img src=x onerror=window.__xss=17>") {
		t.Errorf("attack reward file shown as %q", got)
	}

	// The report of the same job, from a file, with the network off.
	out := filepath.Join(t.TempDir(), "fixture.html")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := view.Report(b.ctx, f, filepath.Join(jobs, "fixture"), view.ReportOptions{}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b.offline()
	b.mu.Lock()
	b.requests = nil
	b.mu.Unlock()
	b.do(chromedp.Navigate("file://" + out))
	b.waitRows(50)
	if got := b.text("#mean-reward"); got != serverMean {
		t.Errorf("report mean reward %q, server %q", got, serverMean)
	}
	if n := eval[int](b, `document.querySelectorAll("section.trial").length`); n != 50 {
		t.Errorf("report has %d trial sections", n)
	}
	// The inline style is allowed by its hash: the page is styled.
	if got := eval[string](b, `getComputedStyle(document.querySelector("header.top")).display`); got != "flex" {
		t.Errorf("report styles not applied (header display %q)", got)
	}
	if !eval[bool](b, `Array.from(document.querySelectorAll(".charts img")).every(i => i.complete && i.naturalWidth > 0)`) {
		t.Error("report charts did not render")
	}
	// A trial's details are reachable by its anchor.
	b.do(chromedp.Click(chromedp.CSS(`#trials tbody tr.trial[data-trial^="hello-trajectory"] td.name a`)))
	b.wait(`location.hash.startsWith("#trial-")`)
	if got := b.text(location(b) + " article.step.agent pre.command"); got != "$ echo 42 > /tmp/answer && cat /tmp/answer" {
		t.Errorf("report trajectory command = %q", got)
	}
	b.shot("report.png")
	b.clean("report")
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, u := range b.requests {
		if !strings.HasPrefix(u, "file://") && !strings.HasPrefix(u, "data:") {
			t.Errorf("the report made a request to %s", u)
		}
	}
}

func location(b *browser) string { return eval[string](b, `location.hash`) }
