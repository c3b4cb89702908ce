package sandbox_test

import (
	"context"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testing/fakeprovider"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/driver"
)

// slowDriver hands out sandboxes whose ReadFile blocks until released, and
// records whether a driver's Close ran while a call was still inside it.
type slowDriver struct {
	driver.Provider
	entered  chan struct{} // one value per call that reached the driver
	release  chan struct{} // closed to let the calls return
	inFlight atomic.Int32
	// closedDuringCall is set when Close ran while a call was in flight:
	// the use-after-close the wrappers exist to prevent.
	closedDuringCall atomic.Bool
}

type slowSandbox struct {
	driver.Sandbox
	d *slowDriver
}

func (d *slowDriver) Create(ctx context.Context, spec driver.Spec) (driver.Sandbox, error) {
	sb, err := d.Provider.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &slowSandbox{Sandbox: sb, d: d}, nil
}

func (d *slowDriver) Close() error {
	if d.inFlight.Load() > 0 {
		d.closedDuringCall.Store(true)
	}
	return d.Provider.Close()
}

func (s *slowSandbox) ReadFile(ctx context.Context, p string) (io.ReadCloser, error) {
	s.d.inFlight.Add(1)
	defer s.d.inFlight.Add(-1)
	s.d.entered <- struct{}{}
	<-s.d.release
	return io.NopCloser(strings.NewReader("done")), nil
}

func (s *slowSandbox) Close() error {
	if s.d.inFlight.Load() > 0 {
		s.d.closedDuringCall.Store(true)
	}
	return s.Sandbox.Close()
}

func newSlow(t *testing.T) (*sandbox.Provider, *slowDriver) {
	t.Helper()
	fd, err := fakeprovider.New(fakeprovider.Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	d := &slowDriver{Provider: fd, entered: make(chan struct{}, 1), release: make(chan struct{})}
	return sandbox.NewProvider("slow", d), d
}

// TestCloseWaitsForCallsInFlight: Close of a sandbox, and of its
// provider, waits for a slow driver call to return before it closes the
// driver, and the call completes; calls after Close are refused. On
// 6f9918d both Closes returned at once and closed the driver under the
// running ReadFile: checked there, this test failed.
func TestCloseWaitsForCallsInFlight(t *testing.T) {
	for _, which := range []string{"sandbox", "provider"} {
		t.Run(which, func(t *testing.T) {
			p, d := newSlow(t)
			ctx := context.Background()
			sb, err := p.Create(ctx, sandbox.Spec{Image: "host"})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Delete(ctx, sb.ID())

			read := make(chan error, 1)
			go func() {
				b, err := sb.ReadFile(ctx, "/f")
				if err == nil && string(b) != "done" {
					err = io.ErrUnexpectedEOF
				}
				read <- err
			}()
			<-d.entered // the call is inside the driver
			var once sync.Once
			release := func() { once.Do(func() { close(d.release) }) }
			defer release()

			closed := make(chan error, 1)
			go func() {
				if which == "sandbox" {
					closed <- sb.Close()
				} else {
					closed <- p.Close()
				}
			}()
			select {
			case err := <-closed:
				t.Fatalf("Close returned (%v) while a call was in flight", err)
			case <-time.After(200 * time.Millisecond):
			}
			release()
			if err := <-read; err != nil {
				t.Errorf("the call in flight failed: %v", err)
			}
			if err := <-closed; err != nil {
				t.Errorf("close: %v", err)
			}
			if d.closedDuringCall.Load() {
				t.Error("the driver was closed while a call was inside it")
			}
			_, err = sb.Stat(ctx, "/")
			wantClass(t, "a call after close", err, sandbox.InvalidArgument)
			if which == "sandbox" {
				p.Close()
			}
		})
	}
}
