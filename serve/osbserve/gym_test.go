package osbserve

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/serve/internal/servetest"
	"github.com/berth-sh/berth/serve/opensandbox"
)

// TestOpenSandboxGymSequence replays the requests NeMo Gym's opensandbox
// provider makes (nemo_gym/sandbox/providers/opensandbox/provider.py on
// the OpenSandbox Python SDK, server-proxy mode, background exec), each
// answered with the one status its generated client accepts: create with
// resourceLimits 202, both endpoint lookups 200, the readiness ping 200,
// the probe command as root (no uid) streaming its stdout, status 200, a
// background exec submitted, polled to completion and its logs read, and
// delete 204. It runs over the fake provider and the local provider.
func TestOpenSandboxGymSequence(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			e := be.newEnv(t, anyImage)
			gymSequence(t, e, servetest.BackendImages[be.name])
		})
	}
}

func gymSequence(t *testing.T, e *testEnv, image string) {
	// Sandbox.create: the SDK's body with Gym's resource map, attribution
	// metadata and image-pull extensions; resourceRequests is a field
	// berth does not use and must accept.
	created := e.OSBCreate(testKey, map[string]any{
		"image":            map[string]any{"uri": image},
		"entrypoint":       []string{"tail", "-f", "/dev/null"},
		"env":              map[string]string{"GYM_ENV": "yes"},
		"metadata":         map[string]string{"nemo-gym.nvidia.com/run": "run-1", "nemo-gym.nvidia.com/user": "alice"},
		"timeout":          3600,
		"resourceLimits":   map[string]string{"cpu": "2", "memory": "8192Mi"},
		"resourceRequests": map[string]string{"cpu": "1", "memory": "4096Mi"},
		"extensions":       map[string]string{"imagePullPolicy": "IfNotPresent", "opensandbox.extensions.image-pull-policy": "IfNotPresent"},
		"secureAccess":     false,
	})
	id := created.ID
	if created.Status.State != opensandbox.StateRunning || created.CreatedAt.IsZero() || created.ExpiresAt == nil ||
		len(created.Entrypoint) != 3 || created.Image != nil {
		t.Fatalf("create answer: %+v", created)
	}
	if d := time.Until(*created.ExpiresAt); d < 59*time.Minute || d > time.Hour {
		t.Fatalf("expiresAt is %v away, want the timeout of 3600 s", d)
	}
	// Both lookups of Sandbox.create, then the provider's own.
	execd, hdr := e.OSBEndpoint(testKey, id, opensandbox.ExecdPort)
	egress, _ := e.OSBEndpoint(testKey, id, opensandbox.EgressPort)
	if hdr[opensandbox.AccessTokenHeader] == "" {
		t.Fatalf("the execd endpoint carries no access token: %v", hdr)
	}
	// In proxy mode Gym sends the API key with the endpoint's headers.
	call := func(method, sub string, body any) servetest.Response {
		return e.Execd(method, execd, hdr, testKey, sub, body)
	}
	if r := call("GET", "/ping", nil); r.Status != http.StatusOK {
		t.Fatalf("ping: %d %s", r.Status, r.Body)
	}
	if r := e.OSBCall("GET", egress+"/policy", testKey, nil, nil); r.Status != http.StatusOK {
		t.Fatalf("egress policy: %d %s", r.Status, r.Body)
	}
	// The create probe: printf as root, which Gym runs without a uid.
	r := call("POST", "/command", map[string]any{"command": "printf nemo-gym-sandbox-ready; echo $GYM_ENV >&2", "background": false, "timeout": 30000})
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("probe: %d %q %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	probe := servetest.Digest(t, servetest.Events(t, r.Body))
	if probe.Stdout != "nemo-gym-sandbox-ready" || probe.Stderr != "yes" || probe.Exit == nil || *probe.Exit != 0 || probe.ID == "" {
		t.Fatalf("probe result %+v from %s", probe, r.Body)
	}
	// status(): GET /v1/sandboxes/{id}, which Gym maps case-insensitively.
	var info opensandbox.Sandbox
	if r := e.OSBCall("GET", "/v1/sandboxes/"+id, testKey, nil, nil); r.Status != http.StatusOK {
		t.Fatalf("get: %d %s", r.Status, r.Body)
	} else if r.JSON(t, &info); info.Status.State != opensandbox.StateRunning || info.Image == nil || info.Image.URI != image ||
		info.Metadata["nemo-gym.nvidia.com/run"] != "run-1" {
		t.Fatalf("get: %+v", info)
	}
	// _exec_background: submit, poll status until not running, read logs.
	r = call("POST", "/command", map[string]any{"command": "echo out; echo err >&2; sleep 1; exit 3", "background": true,
		"cwd": "/tmp", "envs": map[string]string{"X": "y"}, "timeout": 60000})
	if r.Status != http.StatusOK {
		t.Fatalf("background submit: %d %s", r.Status, r.Body)
	}
	sub := servetest.Digest(t, servetest.Events(t, r.Body))
	if sub.ID == "" || !sub.Complete {
		t.Fatalf("background submit must send init and execution_complete at once: %s", r.Body)
	}
	var st opensandbox.CommandStatus
	deadline := time.Now().Add(30 * time.Second)
	for polls := 0; ; polls++ {
		r := call("GET", "/command/status/"+sub.ID, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("status: %d %s", r.Status, r.Body)
		}
		r.JSON(t, &st)
		if !st.Running {
			if polls == 0 {
				t.Fatalf("a command sleeping 1 s was finished at the first poll: %+v", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still running after 30 s: %+v", st)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if st.ExitCode == nil || *st.ExitCode != 3 || st.Error != "exit status 3" || st.FinishedAt == nil || st.ID != sub.ID {
		t.Fatalf("finished status: %+v", st)
	}
	r = call("GET", "/command/"+sub.ID+"/logs", nil)
	if r.Status != http.StatusOK || string(r.Body) != "out\nerr\n" {
		t.Fatalf("logs: %d %q", r.Status, r.Body)
	}
	if cur := r.Header.Get(opensandbox.TailCursorHeader); cur != strconv.Itoa(len("out\nerr\n")) {
		t.Fatalf("tail cursor %q", cur)
	}
	// close(): kill, i.e. DELETE.
	if r := e.OSBCall("DELETE", "/v1/sandboxes/"+id, testKey, nil, nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := e.OSBCall("GET", "/v1/sandboxes/"+id, testKey, nil, nil); r.Status != http.StatusNotFound {
		t.Fatalf("get after delete: %d %s", r.Status, r.Body)
	}
	// Gym's close() reads a second delete's "not found" as already gone.
	if r := e.OSBCall("DELETE", "/v1/sandboxes/"+id, testKey, nil, nil); r.Status != http.StatusNotFound || !containsAll(string(r.Body), "sandbox", "not found") {
		t.Fatalf("second delete: %d %s", r.Status, r.Body)
	}
	if r := call("GET", "/ping", nil); r.Status != http.StatusNotFound && r.Status != http.StatusUnauthorized {
		t.Fatalf("ping after delete: %d %s", r.Status, r.Body)
	}
	if !e.BackendGone(id) {
		t.Fatal("the provider still has the sandbox")
	}
	eventually(t, "no sandboxes left", func() bool {
		infos, err := e.P.List(context.Background(), nil)
		return err == nil && len(infos) == 0
	})
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
