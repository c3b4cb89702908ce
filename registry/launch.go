package registry

import (
	"encoding/json"
	"strings"
	"unicode"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// maxForwardValue bounds a forwarded value: addresses and selectors are short.
const maxForwardValue = 4096

// Variables every launch sets to the canonical provider name.
const (
	BackendVar = "BERTH_BACKEND"
	HarborVar  = "HARBOR_ENV_TYPE"
)

// LaunchEnv is the environment a launcher hands its workers: paths,
// addresses, selectors and the backend name; never a secret.
type LaunchEnv struct {
	Vars  []Var    // in a stable order: backend, credential path, forwards, defaults
	Notes []string // lines for the user: credential supply, target
}

// Launch builds the workers' environment for the named provider: Supply's
// variables, BERTH_BACKEND and HARBOR_ENV_TYPE (the canonical name), the
// forwarded addresses set in env (refusing a value with '@'), and the env
// defaults unless set.
func (r *Registry) Launch(name string, env Environ, keyFile string) (*LaunchEnv, error) {
	e, err := r.Lookup(name)
	if err != nil {
		return nil, err
	}
	sup, err := e.Supply(env, keyFile)
	if err != nil {
		return nil, err
	}
	l := &LaunchEnv{Vars: []Var{{BackendVar, e.Name}, {HarborVar, e.Name}}}
	l.Vars = append(l.Vars, sup.Vars...)
	if strict(env) {
		// Workers refuse an exposed key file too.
		l.Vars = append(l.Vars, Var{StrictKeyFilesVar, "1"})
	}
	for _, k := range e.Forward {
		if !env.Set(k) {
			continue
		}
		v, err := forwardValue(env, k)
		if err != nil {
			return nil, err
		}
		l.Vars = append(l.Vars, Var{k, v})
	}
	for _, d := range e.EnvDefaults {
		v := d.Value
		if env.Set(d.Name) {
			var err error
			if v, err = forwardValue(env, d.Name); err != nil {
				return nil, err
			}
		}
		l.Vars = append(l.Vars, Var{d.Name, v})
	}
	l.Notes = append(l.Notes, sup.Message)
	if sup.Warning != "" {
		l.Notes = append(l.Notes, sup.Warning)
	}
	if line, err := e.TargetLine(env); err != nil {
		return nil, err
	} else if line != "" {
		l.Notes = append(l.Notes, line)
	}
	return l, nil
}

// TargetLine is "<provider> <label>: <value or default>" ("e2b endpoint: E2B
// Cloud (default)"), or "" for an entry without a target.
func (e Entry) TargetLine(env Environ) (string, error) {
	t := e.Target
	if t == nil {
		return "", nil
	}
	v := t.Default
	if env.Set(t.Var) {
		var err error
		if v, err = forwardValue(env, t.Var); err != nil {
			return "", err
		}
	}
	return e.Name + " " + t.Label + ": " + v, nil
}

// forwardValue returns the trimmed value of k if it is safe to hand to
// workers. The errors name the variable but never echo the value: a value
// with '@' may hold a user:password.
func forwardValue(env Environ, k string) (string, error) {
	v := strings.TrimSpace(env.Get(k))
	switch {
	case strings.Contains(v, "@"):
		return "", errdefs.Errorf(errdefs.InvalidArgument, "%s contains '@', which looks like an embedded credential; refusing to forward it (put the credential in the key file instead)", k)
	case len(v) > maxForwardValue:
		return "", errdefs.Errorf(errdefs.InvalidArgument, "%s is longer than %d bytes; refusing to forward it", k, maxForwardValue)
	case strings.ContainsFunc(v, unicode.IsControl):
		return "", errdefs.Errorf(errdefs.InvalidArgument, "%s contains control characters; refusing to forward it", k)
	}
	return v, nil
}

// Shell renders the variables as POSIX shell export lines, quoted.
func (l *LaunchEnv) Shell() string {
	var b strings.Builder
	for _, v := range l.Vars {
		b.WriteString("export ")
		b.WriteString(v.Name)
		b.WriteString("=")
		b.WriteString(shellQuote(v.Value))
		b.WriteString("\n")
	}
	return b.String()
}

// shellQuote wraps s in single quotes, in which nothing is special except the
// quote itself, written by closing the quote, adding an escaped one and
// reopening.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// JSON renders the variables as one flat JSON object (a Ray runtime env's
// env_vars), keys in the order of Vars.
func (l *LaunchEnv) JSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, v := range l.Vars {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(v.Name)
		if err != nil {
			return nil, err
		}
		val, err := json.Marshal(v.Value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// Map returns the variables as a map, for callers that set them on a child
// process or a runtime environment.
func (l *LaunchEnv) Map() map[string]string {
	m := make(map[string]string, len(l.Vars))
	for _, v := range l.Vars {
		m[v.Name] = v.Value
	}
	return m
}

// DefaultBackend is the provider name when a command names none.
const DefaultBackend = "local"

// Backend is the one rule every berth verb follows to pick its provider:
// the flag (--backend, berth run's -e) when given, else $BERTH_BACKEND
// (what `berth env` sets for workers), else $HARBOR_ENV_TYPE (Harbor's own
// variable, which `berth env` sets to the same name), else local. The name
// is trimmed; Lookup resolves aliases and case.
func Backend(flag string, env Environ) string {
	for _, v := range []string{flag, env.Get(BackendVar), env.Get(HarborVar)} {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return DefaultBackend
}
