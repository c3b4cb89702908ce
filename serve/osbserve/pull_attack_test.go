package osbserve

import (
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/testing/testimage"
	"github.com/berth-sh/berth/serve/internal/servetest"
	"github.com/berth-sh/berth/serve/opensandbox"
)

// TestAttackPullFromOpenSandboxCreate: an OpenSandbox create under
// --opensandbox-image '*' naming an image on the server's loopback ends
// Failed with a refusal that names the image only; the service got no
// connection. On 5553f78 the pull connected to it and the Failed
// message carried its body.
func TestAttackPullFromOpenSandboxCreate(t *testing.T) {
	e := newEnvOver(t, servetest.OpenLocal(t), servetest.BashImage, anyImage)
	svc := testimage.ServeInternal(t, "INTERNAL-SECRET-beef01")
	sb := e.OSBCreate(testKey, servetest.OSBImageBody(map[string]any{"image": map[string]any{"uri": svc.Addr + "/internal:1"}}))
	var got opensandbox.Sandbox
	eventually(t, "Failed", func() bool {
		e.OSBCall("GET", "/v1/sandboxes/"+sb.ID, testKey, nil, nil).JSON(t, &got)
		return got.Status.State == opensandbox.StateFailed
	})
	if !strings.Contains(got.Status.Message, servetest.RefusedPull) || strings.Contains(got.Status.Message, svc.Marker) {
		t.Errorf("Failed message: %q", got.Status.Message)
	}
	if n := svc.Accepts(); n != 0 {
		t.Errorf("the pull connected to the internal service %d times", n)
	}
}
