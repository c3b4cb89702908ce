package container

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

func TestCreateRejectsBadInput(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	total, err := memTotal()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Config, *Runtime)
		class  errdefs.Class
		text   string
	}{
		{"memory over host", func(c *Config, _ *Runtime) { c.Limits.MemoryBytes = total + 1<<30 }, errdefs.InvalidArgument, "the host has"},
		{"cpus over host", func(c *Config, _ *Runtime) { c.Limits.CPUs = 4096 }, errdefs.InvalidArgument, "cpus asked"},
		{"runtime missing", func(_ *Config, r *Runtime) { r.Binary = "/nonexistent/runc" }, errdefs.NotSupported, "apt-get install runc"},
		{"bad id", func(c *Config, _ *Runtime) { c.ID = "../x" }, errdefs.InvalidArgument, "container id"},
		{"no lower dirs", func(c *Config, _ *Runtime) { c.LowerDirs = nil }, errdefs.InvalidArgument, "lower dirs"},
		{"missing lower dir", func(c *Config, _ *Runtime) { c.LowerDirs = []string{"/nonexistent/layer"} }, errdefs.InvalidArgument, "lower dir"},
		{"relative dir", func(c *Config, _ *Runtime) { c.Dir = "rel/c" }, errdefs.InvalidArgument, "not absolute"},
		{"no init", func(c *Config, _ *Runtime) { c.Init = nil }, errdefs.InvalidArgument, "no init"},
		{"bad env", func(c *Config, _ *Runtime) { c.Env = []string{"NOEQUALS"} }, errdefs.InvalidArgument, "KEY=value"},
		{"missing mount source", func(c *Config, _ *Runtime) {
			c.Mounts = []Mount{{Source: "/nonexistent/agent", Target: "/.berth/agent"}}
		}, errdefs.InvalidArgument, "mount source"},
		{"missing init binary", func(c *Config, _ *Runtime) {
			c.Init, c.InitBinary = []string{"/.berth/agent"}, "/nonexistent/berth"
		}, errdefs.InvalidArgument, "init binary"},
		{"init binary at a relative path", func(c *Config, _ *Runtime) {
			c.Init, c.InitBinary = []string{"agent"}, "/bin/busybox"
		}, errdefs.InvalidArgument, "absolute path"},
		{"bad network", func(c *Config, _ *Runtime) { c.Network = "host" }, errdefs.InvalidArgument, "network"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t)
			rt := r
			tc.mutate(&c, &rt)
			_, err := rt.Create(context.Background(), c)
			if errdefs.ClassOf(err) != tc.class || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("err = %v (%v), want %v containing %q", err, errdefs.ClassOf(err), tc.class, tc.text)
			}
			if c.Dir != "" && filepath.IsAbs(c.Dir) {
				assertNoDir(t, c.Dir)
			}
		})
	}
}

func TestCreateNotRoot(t *testing.T) {
	old := geteuid
	geteuid = func() int { return 1000 }
	defer func() { geteuid = old }()
	c := Config{ID: "x", LowerDirs: []string{t.TempDir()}, Dir: filepath.Join(t.TempDir(), "c"), Init: []string{"/bin/sh"}}
	_, err := Runtime{Binary: os.Args[0]}.Create(context.Background(), c)
	if errdefs.ClassOf(err) != errdefs.Unauthenticated || !strings.Contains(err.Error(), "need root") {
		t.Fatalf("err = %v, want Unauthenticated saying root is needed", err)
	}
	assertNoDir(t, c.Dir)
}

func TestCreateFailureCleansUp(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	c := testConfig(t)
	c.Init = []string{"/no/such/init"}
	_, err := r.Create(context.Background(), c)
	if err == nil {
		t.Fatal("created a container whose init does not exist")
	}
	if !strings.Contains(err.Error(), "/no/such/init") {
		t.Errorf("error does not say what failed: %v", err)
	}
	assertNoDir(t, c.Dir)
	if r.stateExists(c.ID) {
		t.Errorf("runtime state left")
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mi), c.Dir) {
		t.Errorf("mount left under %s", c.Dir)
	}
	own, _ := cgroupPaths(os.Getpid(), "")
	for h, p := range own {
		if _, err := os.Stat(filepath.Join(p, r.CgroupParent, c.ID)); err == nil {
			t.Errorf("%s cgroup left", h)
		}
	}
}

func TestCreateExistingIDOrDir(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	c := testConfig(t)
	ct := create(t, r, c)
	again := c
	again.Dir = filepath.Join(t.TempDir(), "other")
	if _, err := r.Create(context.Background(), again); errdefs.ClassOf(err) != errdefs.AlreadyExists {
		t.Fatalf("same id: err = %v, want AlreadyExists", err)
	}
	assertNoDir(t, again.Dir)
	sameDir := testConfig(t)
	sameDir.Dir = c.Dir
	if _, err := r.Create(context.Background(), sameDir); errdefs.ClassOf(err) != errdefs.AlreadyExists {
		t.Fatalf("same dir: err = %v, want AlreadyExists", err)
	}
	// The first container is untouched by both failures.
	if out, code := execIn(t, r, ct, "true"); code != 0 {
		t.Fatalf("first container broken: %q", out)
	}
}
