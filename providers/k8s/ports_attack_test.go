package k8s_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testing/nettest"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
)

// Two sandboxes serve the same port: each one's Endpoint and DialPort
// reach its own server and never the other's, on network none too (the
// port-forward is bound to the pod the handle was made for, whatever the
// port number). A port of a sandbox is reached only through its handle.
func TestAttackEndpointOtherSandbox(t *testing.T) {
	p := sandbox.NewProvider("k8s", openDriver(t, options(namespace(t))))
	t.Cleanup(func() { p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sbs := map[string]*sandbox.Sandbox{}
	for _, name := range []string{"a", "b"} {
		sb, err := p.Create(ctx, sandbox.Spec{Image: local.DefaultImage, TTL: 5 * time.Minute, Network: sandbox.Network{Mode: sandbox.NetworkNone}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sb.Delete(context.Background()); sb.Close() })
		res, err := sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c",
			"mkdir -p /tmp/www && echo served-by-" + name + " > /tmp/www/index.html && busybox httpd -p 8000 -h /tmp/www"}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("server in %s: %+v %v", name, res, err)
		}
		sbs[name] = sb
	}
	for name, sb := range sbs {
		ep, err := sb.Endpoint(ctx, sandbox.Port{Number: 8000})
		if err != nil {
			t.Fatal(err)
		}
		var body string
		for {
			body, err = nettest.Get(ctx, ep.URL)
			if err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if body != "served-by-"+name+"\n" {
			t.Errorf("endpoint of %s answered %q, %v", name, body, err)
		}
		c, err := sb.DialPort(ctx, 8000)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(c, "GET / HTTP/1.0\r\n\r\n")
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("DialPort of %s: %v", name, err)
		}
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<10))
		c.Close()
		if string(b) != "served-by-"+name+"\n" {
			t.Errorf("DialPort of %s answered %q", name, b)
		}
	}
}
