package sandbox_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/sandbox"
)

func TestSpecValidate(t *testing.T) {
	ok := func() sandbox.Spec { return sandbox.Spec{Image: "debian:bookworm-slim"} }
	many := map[string]string{}
	for i := range 65 {
		many[strings.Repeat("k", i+1)] = "v"
	}
	for _, tc := range []struct {
		name  string
		mod   func(*sandbox.Spec)
		valid bool
	}{
		{"image", func(*sandbox.Spec) {}, true},
		{"build", func(s *sandbox.Spec) { s.Image, s.Build = "", &sandbox.Build{ContextDir: "/ctx"} }, true},
		{"allowlist", func(s *sandbox.Spec) {
			s.Network = sandbox.Network{Mode: sandbox.NetworkAllowlist, Allow: []string{"pypi.org"}}
		}, true},
		{"public", func(s *sandbox.Spec) { s.Network.Mode = sandbox.NetworkPublic }, true},
		{"labels and env", func(s *sandbox.Spec) {
			s.Labels = map[string]string{"job": "j1", "trial": ""}
			s.Env = map[string]string{"A": "1"}
		}, true},
		{"no image", func(s *sandbox.Spec) { s.Image = "" }, false},
		{"image and build", func(s *sandbox.Spec) { s.Build = &sandbox.Build{ContextDir: "/ctx"} }, false},
		{"build without context", func(s *sandbox.Spec) { s.Image, s.Build = "", &sandbox.Build{} }, false},
		{"negative cpus", func(s *sandbox.Spec) { s.Resources.CPUs = -1 }, false},
		{"negative memory", func(s *sandbox.Spec) { s.Resources.MemoryMB = -1 }, false},
		{"negative storage", func(s *sandbox.Spec) { s.Resources.StorageMB = -1 }, false},
		{"negative gpus", func(s *sandbox.Spec) { s.Resources.GPUs = -1 }, false},
		{"negative ttl", func(s *sandbox.Spec) { s.TTL = -time.Second }, false},
		{"empty allowlist", func(s *sandbox.Spec) { s.Network.Mode = sandbox.NetworkAllowlist }, false},
		{"unknown network", func(s *sandbox.Spec) { s.Network.Mode = "bridge" }, false},
		{"empty label key", func(s *sandbox.Spec) { s.Labels = map[string]string{"": "v"} }, false},
		{"label key with =", func(s *sandbox.Spec) { s.Labels = map[string]string{"a=b": "v"} }, false},
		{"label key with ,", func(s *sandbox.Spec) { s.Labels = map[string]string{"a,b": "v"} }, false},
		{"long label key", func(s *sandbox.Spec) { s.Labels = map[string]string{strings.Repeat("k", 64): "v"} }, false},
		{"control char in value", func(s *sandbox.Spec) { s.Labels = map[string]string{"k": "a\nb"} }, false},
		{"long label value", func(s *sandbox.Spec) { s.Labels = map[string]string{"k": strings.Repeat("v", 257)} }, false},
		{"too many labels", func(s *sandbox.Spec) { s.Labels = many }, false},
		{"empty env name", func(s *sandbox.Spec) { s.Env = map[string]string{"": "v"} }, false},
		{"env name with =", func(s *sandbox.Spec) { s.Env = map[string]string{"A=B": "v"} }, false},
		{"env name with NUL", func(s *sandbox.Spec) { s.Env = map[string]string{"A\x00": "v"} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ok()
			tc.mod(&s)
			err := s.Validate()
			if tc.valid && err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
			if !tc.valid && !errors.Is(err, sandbox.ErrInvalidArgument) {
				t.Errorf("Validate() = %v, want InvalidArgument", err)
			}
		})
	}
}

func TestSpecWithDefaults(t *testing.T) {
	in := sandbox.Spec{Image: "x", Labels: map[string]string{"a": "1"}, Env: map[string]string{"E": "1"}}
	out := in.WithDefaults()
	if out.TTL != sandbox.DefaultTTL || out.Network.Mode != sandbox.NetworkNone {
		t.Errorf("defaults: ttl %v, network %q", out.TTL, out.Network.Mode)
	}
	out.Labels["a"], out.Env["E"] = "changed", "changed"
	if in.Labels["a"] != "1" || in.Env["E"] != "1" {
		t.Error("WithDefaults shares maps with the caller's Spec")
	}
	kept := sandbox.Spec{Image: "x", TTL: time.Minute, Network: sandbox.Network{Mode: sandbox.NetworkPublic}}.WithDefaults()
	if kept.TTL != time.Minute || kept.Network.Mode != sandbox.NetworkPublic {
		t.Errorf("WithDefaults overrode set values: %+v", kept)
	}
}

func TestLabels(t *testing.T) {
	if k, v, err := sandbox.ParseLabel("job=a=b"); err != nil || k != "job" || v != "a=b" {
		t.Errorf("ParseLabel(job=a=b) = %q %q %v", k, v, err)
	}
	for _, bad := range []string{"novalue", "=v", ""} {
		if _, _, err := sandbox.ParseLabel(bad); !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("ParseLabel(%q) = %v, want InvalidArgument", bad, err)
		}
	}
	have := map[string]string{"job": "j", "trial": "t"}
	for _, tc := range []struct {
		want  map[string]string
		match bool
	}{
		{nil, true},
		{map[string]string{"job": "j"}, true},
		{map[string]string{"job": "j", "trial": "t"}, true},
		{map[string]string{"job": "other"}, false},
		{map[string]string{"missing": ""}, false},
	} {
		if got := sandbox.MatchLabels(have, tc.want); got != tc.match {
			t.Errorf("MatchLabels(%v) = %v", tc.want, got)
		}
	}
}
