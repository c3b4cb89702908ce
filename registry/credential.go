package registry

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/berth-sh/berth/sandbox/types"
)

// maxKeyFile bounds what is read from a key file: keys and ~/.modal.toml are
// a few hundred bytes; anything near this is not a key file.
const maxKeyFile = 1 << 20

// Supply is the launcher-side outcome of credential supply.
type Supply struct {
	// Source is "file", "environment" or "none" (no credential needed).
	Source string
	// Path is the key file, for Source "file".
	Path string
	// Vars are forwarded to workers (FILE_VAR=<path>); never a secret.
	Vars []Var
	// Message is the line printed at launch
	// ("credential supply: file <path> (readable here; ...)").
	Message string
}

// Supply sources.
const (
	SourceFile        = "file"
	SourceEnvironment = "environment"
	SourceNone        = "none"
)

// Supply runs the launcher-side rules (see the package doc). keyFile is the
// explicit path from the entry's flag, or "".
func (e Entry) Supply(env Environ, keyFile string) (Supply, error) {
	c := e.Credential
	if c.None() {
		if keyFile != "" {
			return Supply{}, types.Errorf(types.InvalidArgument, "the %s sandbox mode needs no credential; a key file does not apply", e.Name)
		}
		return Supply{Source: SourceNone, Message: "credential supply: none (" + e.Name + " needs no credential)"}, nil
	}
	path, explicit := keyFile, keyFile != ""
	if !explicit && env.Set(c.FileVar) {
		// The file variable in the launcher's own environment names the
		// file as deliberately as the flag does.
		path, explicit = strings.TrimSpace(env.Get(c.FileVar)), true
	}
	if !explicit {
		path = c.DefaultPath
	}
	path = env.ExpandHome(path)

	if _, err := readKeyFile(path); err == nil {
		// Workers may run in another directory: forward an absolute path.
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		return Supply{
			Source:  SourceFile,
			Path:    path,
			Vars:    []Var{{Name: c.FileVar, Value: path}},
			Message: "credential supply: file " + path + " (readable here; forwarding the path, workers read it themselves)",
		}, nil
	}
	if explicit {
		return Supply{}, types.Errorf(types.Unauthenticated, "%s=%s is missing or empty", c.FileVar, path)
	}
	if allSet(env, c.KeyVars) {
		return Supply{
			Source:  SourceEnvironment,
			Message: "credential supply: environment (" + c.keyNames() + " set here; forwarding nothing, workers are assumed to have them)",
		}, nil
	}
	return Supply{}, types.Errorf(types.Unauthenticated,
		"the %s sandbox mode needs credentials: put them in a file (%s; %s overrides) or in the environment as %s. Provision the file with: %s",
		e.Name, path, c.FileVar, c.keyNames(), c.ProvisionHint)
}

// Resolve runs the worker-side rules and returns the secrets keyed by the
// entry's key variables. A provider without a credential returns nil, nil.
func (e Entry) Resolve(env Environ) (map[string]Secret, error) {
	s, _, err := e.resolve(env)
	return s, err
}

// Available reports whether the worker-side credential resolves, and from
// where ("environment", "file <path>"), for the golden test's skip and for
// `berth providers`.
func (e Entry) Available(env Environ) (ok bool, source string) {
	_, source, err := e.resolve(env)
	return err == nil, source
}

// resolve is Resolve plus where the credential came from ("none",
// "environment" or "file <path>").
func (e Entry) resolve(env Environ) (map[string]Secret, string, error) {
	c := e.Credential
	if c.None() {
		return nil, SourceNone, nil
	}
	if allSet(env, c.KeyVars) {
		out := make(map[string]Secret, len(c.KeyVars))
		for _, k := range c.KeyVars {
			out[k] = Secret(strings.TrimSpace(env.Get(k)))
		}
		return out, SourceEnvironment, nil
	}
	path := c.DefaultPath
	if env.Set(c.FileVar) {
		path = strings.TrimSpace(env.Get(c.FileVar))
	}
	path = env.ExpandHome(path)
	missing := func() error {
		return types.Errorf(types.Unauthenticated, "no API key: %s is unset and %s is missing or empty", c.keyNames(), path)
	}
	data, err := readKeyFile(path)
	if err != nil {
		return nil, "", missing()
	}
	var vals map[string]string
	if c.ParseFile == nil {
		vals = map[string]string{c.KeyVars[0]: string(bytes.TrimSpace(data))}
	} else if vals, err = c.ParseFile(data, env); err != nil {
		// ParseFile's errors name keys and profiles, never values.
		return nil, "", types.Errorf(types.Unauthenticated, "no API key: %s is unset and %s holds none: %w", c.keyNames(), path, err)
	}
	out := make(map[string]Secret, len(c.KeyVars))
	for _, k := range c.KeyVars {
		v := strings.TrimSpace(vals[k])
		if v == "" {
			if len(c.KeyVars) == 1 {
				return nil, "", missing()
			}
			return nil, "", types.Errorf(types.Unauthenticated, "no API key: %s is unset and %s lacks %s", c.keyNames(), path, k)
		}
		out[k] = Secret(v)
	}
	return out, "file " + path, nil
}

// readKeyFile returns the file's bytes when it is a readable regular file
// whose contents are not blank. Its errors never hold the contents.
func readKeyFile(path string) ([]byte, error) {
	if path == "" {
		return nil, errors.New("no path")
	}
	// A FIFO or device would block or never end: check before opening, open
	// without blocking, and check again what was opened.
	if fi, err := os.Stat(path); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxKeyFile)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%s is empty", path)
	}
	return data, nil
}

// allSet reports whether every variable is set to a non-blank value; half a
// pair counts as missing.
func allSet(env Environ, vars []string) bool {
	for _, v := range vars {
		if !env.Set(v) {
			return false
		}
	}
	return len(vars) > 0
}

// keyNames is how messages name the key variables: "E2B_API_KEY",
// "MODAL_TOKEN_ID + MODAL_TOKEN_SECRET".
func (c Credential) keyNames() string { return strings.Join(c.KeyVars, " + ") }

// workerEnv is env with the entry's env defaults applied where unset (blank
// counts as unset, as everywhere in this package).
func (e Entry) workerEnv(env Environ) Environ {
	if len(e.EnvDefaults) == 0 {
		return env
	}
	defaults := e.EnvDefaults
	return Environ{
		Home: env.Home,
		Lookup: func(name string) (string, bool) {
			if env.Set(name) {
				return env.Lookup(name)
			}
			for _, d := range defaults {
				if d.Name == name {
					return d.Value, true
				}
			}
			if env.Lookup == nil {
				return "", false
			}
			return env.Lookup(name)
		},
	}
}
