package dockerfile

import (
	"runtime"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// vars is a scope of variables in the order they were set; a name set
// again keeps its place. It is the lexer's shell.EnvGetter.
type vars struct {
	keys []string
	m    map[string]string
}

func (v *vars) Get(k string) (string, bool) {
	s, ok := v.m[k]
	return s, ok
}

func (v *vars) Keys() []string { return v.keys }

func (v *vars) set(k, s string) {
	if v.m == nil {
		v.m = map[string]string{}
	}
	if _, ok := v.m[k]; !ok {
		v.keys = append(v.keys, k)
	}
	v.m[k] = s
}

// platformArgs are the build arguments BuildKit defines before the first
// line (a build argument of the same name overrides one): berth builds for
// the host's platform, so target and build platform are the host's.
func platformArgs(buildArgs map[string]string) *vars {
	p := "linux/" + runtime.GOARCH
	v := &vars{}
	for _, kv := range [][2]string{
		{"BUILDPLATFORM", p}, {"BUILDOS", "linux"}, {"BUILDOSVERSION", ""}, {"BUILDARCH", runtime.GOARCH}, {"BUILDVARIANT", ""},
		{"TARGETPLATFORM", p}, {"TARGETOS", "linux"}, {"TARGETOSVERSION", ""}, {"TARGETARCH", runtime.GOARCH}, {"TARGETVARIANT", ""},
		{"TARGETSTAGE", "default"},
	} {
		s := kv[1]
		if o, ok := buildArgs[kv[0]]; ok {
			s = o
		}
		v.set(kv[0], s)
	}
	return v
}

// arg declares build arguments as BuildKit does. Before FROM they are in
// scope of FROM only. After it, a build argument given for the name wins,
// then the default (substituted as it is declared), then the value of an
// ARG of that name before FROM (or a platform argument); without any of
// them the name stays unset.
func (d *dispatcher) arg(c *instructions.ArgCommand, in *Instruction) error {
	scope := d.env
	if !d.seenFrom {
		scope = d.global
	}
	for _, kv := range c.Args {
		s, set, err := d.argValue(kv, scope)
		if err != nil {
			return lineErr(in.Line, errdefs.InvalidArgument, err)
		}
		if !set {
			continue
		}
		scope.set(kv.Key, s)
		in.Args = append(in.Args, kv.Key, s)
	}
	return nil
}

func (d *dispatcher) argValue(kv instructions.KeyValuePairOptional, scope *vars) (string, bool, error) {
	if s, ok := d.buildArgs[kv.Key]; ok {
		return s, true, nil
	}
	if kv.Value != nil {
		s, _, err := d.lex.ProcessWord(*kv.Value, scope)
		return s, err == nil, err
	}
	if d.seenFrom {
		if s, ok := d.global.Get(kv.Key); ok {
			return s, true, nil
		}
	}
	return "", false, nil
}
