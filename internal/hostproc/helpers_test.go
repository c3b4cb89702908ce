package hostproc

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// buffer is a Writer safe for the two pumps at once.
type buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// sh starts `sh -c script` on the host with spec's other fields.
func sh(t *testing.T, spec Spec, script string) *Process {
	t.Helper()
	spec.Path, spec.Args = "/bin/sh", []string{"sh", "-c", script}
	if spec.Env == nil {
		spec.Env = Environ(nil)
	}
	p, err := Start(ctxT(t), spec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// run runs script to its end and returns its exit and output.
func run(t *testing.T, spec Spec, script string) (Exit, string, string) {
	t.Helper()
	var out, errb buffer
	spec.Stdout, spec.Stderr = &out, &errb
	ex := sh(t, spec, script).Wait()
	return ex, out.String(), errb.String()
}

func writeFile(t *testing.T, p, body string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
}
