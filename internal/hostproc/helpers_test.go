package hostproc

import (
	"context"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth/internal/syncbuf"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
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
	var out, errb syncbuf.Buffer
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
