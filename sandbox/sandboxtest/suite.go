package sandboxtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/sandbox"
)

// Harness is what a provider hands the suite. There is no list of cases to
// skip: what a provider lacks, its Capabilities say (derived from its
// driver's interfaces), and the cases of optional features check either
// the feature or that the call is refused as NotSupported.
type Harness struct {
	// Open returns a fresh provider value each call; values share the
	// backend, so a sandbox created through one is reachable through
	// another (Connect from a new process). The suite closes it.
	Open func(t *testing.T) *sandbox.Provider
	// Spec is the base Spec of every sandbox the suite creates (image,
	// resources); the suite adds labels, env and TTLs to a copy.
	Spec func() sandbox.Spec
	// ExpiryGrace is how long after its deadline an expired sandbox may
	// still be seen; zero means 10s.
	ExpiryGrace time.Duration
	// StorageMB is the disk limit the storage case gives its sandbox
	// (with Capabilities.Storage), which then writes 16 MB past it: small,
	// so that the case stays quick. Zero skips the case, for a test
	// backend that records the size with no disk behind it.
	StorageMB int
}

// Timeouts that bound each case so that a hung provider fails rather than
// stalls the run. They bound, they do not measure.
const (
	caseTimeout     = 2 * time.Minute
	cleanupTimeout  = time.Minute
	outputTimeout   = 30 * time.Second
	commandDeadline = 15 * time.Second
)

// Run runs the suite. Every case is a parallel subtest with its own sandbox,
// deleted when the case ends.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Open == nil || h.Spec == nil {
		t.Fatal("sandboxtest: Harness.Open and Harness.Spec are required")
	}
	if h.ExpiryGrace == 0 {
		h.ExpiryGrace = 10 * time.Second
	}
	for _, g := range []struct {
		name  string
		cases []testCase
	}{
		{"exec", execCases},
		{"files", fileCases},
		{"lifecycle", lifecycleCases},
		{"network", networkCases},
	} {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(t, h)
				})
			}
		})
	}
}

type testCase struct {
	name string
	run  func(t *testing.T, h Harness)
}

// open returns a provider value that is closed when the test ends.
func open(t *testing.T, h Harness) *sandbox.Provider {
	t.Helper()
	p := h.Open(t)
	if p == nil {
		t.Fatal("Harness.Open returned nil")
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close provider: %v", err)
		}
	})
	return p
}

// testContext bounds a case; it ends with the test.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), caseTimeout)
	t.Cleanup(cancel)
	return ctx
}

// suiteLabel marks every sandbox of the suite, for reaping leftovers.
const suiteLabel = "berth-suite"

// create makes a sandbox from the harness Spec changed by mod, and deletes
// it when the test ends.
func create(t *testing.T, h Harness, p *sandbox.Provider, mod func(*sandbox.Spec)) *sandbox.Sandbox {
	t.Helper()
	spec := h.Spec()
	spec.Labels = maps.Clone(spec.Labels)
	if spec.Labels == nil {
		spec.Labels = map[string]string{}
	}
	spec.Labels[suiteLabel] = "1"
	if mod != nil {
		mod(&spec)
	}
	sb, err := p.Create(testContext(t), spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	id := sb.ID()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := p.Delete(ctx, id); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("cleanup: delete %s: %v", id, err)
		}
		if err := sb.Close(); err != nil {
			t.Errorf("cleanup: close %s: %v", id, err)
		}
	})
	return sb
}

// fresh is the common start of a case: a provider value and a sandbox.
func fresh(t *testing.T, h Harness) (context.Context, *sandbox.Provider, *sandbox.Sandbox) {
	t.Helper()
	p := open(t, h)
	sb := create(t, h, p, nil)
	return testContext(t), p, sb
}

// workDir makes a fresh directory to run commands in.
func workDir(t *testing.T, ctx context.Context, sb *sandbox.Sandbox) string {
	t.Helper()
	dir := "/tmp/berth-suite-" + randomHex(4)
	if err := sb.MakeDir(ctx, dir); err != nil {
		t.Fatalf("make work dir %s: %v", dir, err)
	}
	removeAtEnd(t, sb, dir)
	return dir
}

// removeAtEnd removes p when the test ends, before the sandbox is deleted
// (cleanups run in reverse): on a provider whose sandboxes share the
// host's /tmp (fakeprovider's host image) it would be left there
// otherwise. Best effort: a case may have ended the sandbox already.
func removeAtEnd(t *testing.T, sb *sandbox.Sandbox, p string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = sb.Remove(ctx, p)
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// run executes a shell script and fails the test on a transport error.
func run(t *testing.T, ctx context.Context, sb *sandbox.Sandbox, cmd sandbox.Command) sandbox.Result {
	t.Helper()
	res, err := sb.Run(ctx, cmd)
	if err != nil {
		t.Fatalf("run %q: %v", cmd.Args, err)
	}
	return res
}

func sh(script string) []string { return []string{"sh", "-c", script} }

// wantClass checks errors.Is against the class sentinel and ClassOf.
func wantClass(t *testing.T, what string, err error, c sandbox.Class) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: got no error, want %v", what, c)
		return
	}
	if !errors.Is(err, c.Sentinel()) || sandbox.ClassOf(err) != c {
		t.Errorf("%s: got %v (class %v), want class %v", what, err, sandbox.ClassOf(err), c)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	// first is closed on the first non-empty write, when set.
	first chan struct{}
	once  sync.Once
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(p) > 0 && b.first != nil {
		b.once.Do(func() { close(b.first) })
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
