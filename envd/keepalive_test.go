package envd

import (
	"encoding/binary"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// The public option allows whole seconds; tests shrink the interval through
// the field so that they stay fast.
func fastKeepalive(c *Client, d time.Duration) { c.opts.keepalive = d }

func TestKeepaliveKeepsQuietStreamAlive(t *testing.T) {
	e := unixEnv(t, ServerOptions{})
	fastKeepalive(e.client, 50*time.Millisecond)
	// Silent for several idle windows (3 x 50 ms): only keepalives keep it.
	code, _, _, err := run(t, e.client, driver.Command{Args: []string{"sleep", "0.5"}})
	if err != nil || code != 0 {
		t.Fatalf("quiet command: %d %v", code, err)
	}
}

func TestSilentServerIsUnavailable(t *testing.T) {
	// A server that sends start and then nothing, not even keepalives.
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/connect+json")
		msg := []byte(`{"event":{"start":{"pid":7}}}`)
		hdr := make([]byte, 5)
		binary.BigEndian.PutUint32(hdr[1:], uint32(len(msg)))
		_, _ = w.Write(append(hdr, msg...))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer ts.Close()
	c, err := NewClient(ts.URL, ts.Client())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fastKeepalive(c, 30*time.Millisecond)
	p, err := c.Exec(ctxT(t), driver.Command{Args: []string{"anything"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.PID() != 7 {
		t.Fatalf("pid %d", p.PID())
	}
	if _, err := p.Wait(ctxT(t)); !errors.Is(err, errdefs.ErrUnavailable) || !errors.Is(err, errIdle) {
		t.Fatalf("wait on a silent stream: %v, want Unavailable (idle)", err)
	}
}

func TestClientCloseEndsStreams(t *testing.T) {
	e := unixEnv(t, ServerOptions{})
	p, err := e.client.Exec(ctxT(t), driver.Command{Args: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = e.client.Close()
	if _, err := p.Wait(ctxT(t)); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("wait after client close: %v, want Unavailable", err)
	}
	if _, err := e.client.Exec(ctxT(t), driver.Command{Args: []string{"true"}}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("exec after close: %v, want Unavailable", err)
	}
}
