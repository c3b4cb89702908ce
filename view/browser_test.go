package view_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath finds Debian's chromium (BERTH_CHROMIUM overrides) or skips.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("BERTH_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("needs chromium for the browser tests (apt-get install chromium)")
	return ""
}

// browser is one headless Chromium tab with everything the page says
// recorded: console calls, uncaught exceptions, browser log entries (a CSP
// violation is one), dialogs (alert) and every request's URL.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	messages []string
	requests []string
	dialogs  []string
}

// guard runs before any script of every page: the attack strings assign
// window.__xss, and an assignment from anywhere shows on the console, as
// does a call of alert.
const guard = `(() => {
  let ran = [];
  Object.defineProperty(window, "__xss", { configurable: false,
    set(v) { ran.push(v); console.error("XSS RAN " + v); }, get() { return ran.length ? ran : undefined; } });
  Object.defineProperty(window, "__xssRan", { get() { return ran.slice(); } });
  window.alert = (m) => { ran.push("alert"); console.error("XSS ALERT " + m); };
})();`

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath(t)
	// The machine has no network: without these flags Chromium keeps
	// trying to reach its update, sync and field-trial servers.
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{t: t}
	ctx, cancelB := chromedp.NewContext(actx, chromedp.WithListener(b.event))
	t.Cleanup(func() { cancelB(); cancelA() })
	b.ctx = ctx
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: guard}); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *browser) event(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch e := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		var parts []string
		for _, a := range e.Args {
			parts = append(parts, strings.Trim(string(a.Value), `"`)+a.Description)
		}
		b.messages = append(b.messages, "console."+string(e.Type)+": "+strings.Join(parts, " "))
	case *runtime.EventExceptionThrown:
		b.messages = append(b.messages, "exception: "+e.ExceptionDetails.Text)
	case *log.EventEntryAdded:
		if e.Entry.Level == log.EntryLevelError || e.Entry.Level == log.EntryLevelWarning {
			b.messages = append(b.messages, "log."+string(e.Entry.Level)+": "+e.Entry.Text+" "+e.Entry.URL)
		}
	case *page.EventJavascriptDialogOpening:
		b.dialogs = append(b.dialogs, e.Message)
		go chromedp.Call(b.ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
	case *network.EventRequestWillBeSent:
		b.requests = append(b.requests, e.Request.URL)
	}
}

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatal(err)
	}
}

func eval[T any](b *browser, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.t.Fatalf("%s: %v", js, err)
	}
	return v
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("%s: %v", sel, err)
	}
	return s
}

// clean fails the test on anything the page printed or ran that it
// should not have: a console error, an exception, a CSP violation, a
// dialog, an attack's flag.
func (b *browser) clean(where string) {
	b.t.Helper()
	time.Sleep(200 * time.Millisecond) // let late events arrive
	b.mu.Lock()
	msgs, dialogs := b.messages, b.dialogs
	b.messages, b.dialogs = nil, nil
	b.mu.Unlock()
	for _, m := range msgs {
		b.t.Errorf("%s: %s", where, m)
	}
	for _, d := range dialogs {
		b.t.Errorf("%s: a dialog opened: %q", where, d)
	}
	if ran := eval[[]any](b, `window.__xssRan`); len(ran) > 0 {
		b.t.Errorf("%s: attack code ran: %v", where, ran)
	}
}

// shot saves a screenshot of the viewport into the test's artifacts.
func (b *browser) shot(name string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatal(err)
	}
	p := filepath.Join(artifacts(b.t), name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s", p)
	return p
}

// artifacts is where a test leaves screenshots: $BERTH_TEST_ARTIFACTS/<test>
// when set (CI keeps it), else a directory under the test's temp dir.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("BERTH_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "berth-view-artifacts")
	}
	dir = filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// rows returns the data-* attribute of every row of the trials table.
func rows(b *browser, attr string) []string {
	b.t.Helper()
	out := eval[[]string](b, fmt.Sprintf(`Array.from(document.querySelectorAll("#trials tbody tr.trial")).map(r => r.getAttribute(%q))`, attr))
	return out
}

// wait waits until a JavaScript expression is true.
func (b *browser) wait(expr string) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		cancel()
		if err == nil && ok {
			return
		}
		// An error is a page being replaced under the evaluation; retry.
		if time.Now().After(deadline) {
			b.t.Fatalf("waiting for %s: %v", expr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// follow clicks a link or button and waits for the page it loads.
func (b *browser) follow(sel string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		b.t.Fatalf("following %s: %v", sel, err)
	}
}

// waitRows waits until the trials table has n rows.
func (b *browser) waitRows(n int) {
	b.t.Helper()
	b.wait(fmt.Sprintf(`document.querySelectorAll("#trials tbody tr.trial").length === %d`, n))
}

// offline cuts the tab off the network: every request fails.
func (b *browser) offline() {
	b.t.Helper()
	if _, err := chromedp.Call(b.ctx, network.EmulateNetworkConditionsByRule, network.EmulateNetworkConditionsByRuleParams{
		MatchedNetworkConditions: []*network.Conditions{{Offline: true, DownloadThroughput: -1, UploadThroughput: -1}},
	}); err != nil {
		b.t.Fatal(err)
	}
}
