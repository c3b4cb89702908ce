package main

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/berth-sh/berth/registry"
)

func TestVersionLine(t *testing.T) {
	old := version
	t.Cleanup(func() { version = old })

	version = "v1.2.3"
	var out, errb bytes.Buffer
	if code := run([]string{"version"}, nil, &out, &errb, registry.MapEnviron(nil, t.TempDir())); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	want := "berth v1.2.3 " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if out.String() != want {
		t.Errorf("version with -X main.version: got %q, want %q", out.String(), want)
	}

	// Without a link-time version the build info decides; a test binary
	// reports "(devel)" or a VCS revision, never an empty field.
	version = ""
	if v := buildVersion(); v == "" || bytes.ContainsAny([]byte(v), " \t\n") {
		t.Errorf("buildVersion() = %q, want one non-empty word", v)
	}
}
