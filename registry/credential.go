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

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// maxKeyFile bounds what is read from a key file: keys and ~/.modal.toml are
// a few hundred bytes; anything near this is not a key file.
const maxKeyFile = 1 << 20

// StrictKeyFilesVar, set to 1 (true, yes), makes a key file that others
// can read (or write) a refusal instead of a warning, on the launcher and
// the worker side alike; Launch forwards it to workers.
const StrictKeyFilesVar = "BERTH_STRICT_KEY_FILES"

// strict reports whether env asks for StrictKeyFilesVar.
func strict(env Environ) bool {
	switch strings.ToLower(strings.TrimSpace(env.Get(StrictKeyFilesVar))) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

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
	// Warning, when set, is a line for the user about the key file: others
	// can read it (see StrictKeyFilesVar).
	Warning string
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
			return Supply{}, errdefs.Errorf(errdefs.InvalidArgument, "the %s sandbox mode needs no credential; a key file does not apply", e.Name)
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

	if _, warning, err := readKeyFile(path, strict(env)); err == nil {
		// Workers may run in another directory: forward an absolute path.
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		return Supply{
			Source:  SourceFile,
			Path:    path,
			Vars:    []Var{{Name: c.FileVar, Value: path}},
			Message: "credential supply: file " + path + " (readable here; forwarding the path, workers read it themselves)",
			Warning: warning,
		}, nil
	} else if errors.Is(err, errExposed) {
		return Supply{}, errdefs.Errorf(errdefs.Unauthenticated, "%w", err)
	}
	if explicit {
		return Supply{}, errdefs.Errorf(errdefs.Unauthenticated, "%s=%s is missing or empty", c.FileVar, path)
	}
	if allSet(env, c.KeyVars) {
		return Supply{
			Source:  SourceEnvironment,
			Message: "credential supply: environment (" + c.keyNames() + " set here; forwarding nothing, workers are assumed to have them)",
		}, nil
	}
	return Supply{}, errdefs.Errorf(errdefs.Unauthenticated,
		"the %s sandbox mode needs credentials: put them in a file (%s; %s overrides) or in the environment as %s. Provision the file with: %s",
		e.Name, path, c.FileVar, c.keyNames(), c.ProvisionHint)
}

// Resolve runs the worker-side rules and returns the secrets keyed by the
// entry's key variables. A provider without a credential returns nil, nil.
func (e Entry) Resolve(env Environ) (map[string]Secret, error) {
	s, _, _, err := e.resolve(env)
	return s, err
}

// Available reports whether the worker-side credential resolves, and from
// where ("environment", "file <path>"), for the golden test's skip and for
// `berth providers`.
func (e Entry) Available(env Environ) (ok bool, source string) {
	_, source, _, err := e.resolve(env)
	return err == nil, source
}

// resolve is Resolve plus where the credential came from ("none",
// "environment" or "file <path>") and a warning about the key file.
func (e Entry) resolve(env Environ) (map[string]Secret, string, string, error) {
	c := e.Credential
	if c.None() {
		return nil, SourceNone, "", nil
	}
	if allSet(env, c.KeyVars) {
		out := make(map[string]Secret, len(c.KeyVars))
		for _, k := range c.KeyVars {
			out[k] = Secret(strings.TrimSpace(env.Get(k)))
		}
		return out, SourceEnvironment, "", nil
	}
	path := c.DefaultPath
	if env.Set(c.FileVar) {
		path = strings.TrimSpace(env.Get(c.FileVar))
	}
	path = env.ExpandHome(path)
	missing := func() error {
		return errdefs.Errorf(errdefs.Unauthenticated, "no API key: %s is unset and %s is missing or empty", c.keyNames(), path)
	}
	data, warning, err := readKeyFile(path, strict(env))
	if errors.Is(err, errExposed) {
		return nil, "", "", errdefs.Errorf(errdefs.Unauthenticated, "no API key: %s is unset and %w", c.keyNames(), err)
	}
	if err != nil {
		return nil, "", "", missing()
	}
	var vals map[string]string
	if c.ParseFile == nil {
		vals = map[string]string{c.KeyVars[0]: string(bytes.TrimSpace(data))}
	} else if vals, err = c.ParseFile(data, env); err != nil {
		// ParseFile's errors name keys and profiles, never values.
		return nil, "", "", errdefs.Errorf(errdefs.Unauthenticated, "no API key: %s is unset and %s holds none: %w", c.keyNames(), path, err)
	}
	out := make(map[string]Secret, len(c.KeyVars))
	for _, k := range c.KeyVars {
		v := strings.TrimSpace(vals[k])
		if v == "" {
			if len(c.KeyVars) == 1 {
				return nil, "", "", missing()
			}
			return nil, "", "", errdefs.Errorf(errdefs.Unauthenticated, "no API key: %s is unset and %s lacks %s", c.keyNames(), path, k)
		}
		out[k] = Secret(v)
	}
	return out, "file " + path, warning, nil
}

// errExposed is a key file others can read or write, refused in strict mode.
var errExposed = errors.New("others can read or write the key file")

// readKeyFile returns the file's bytes when it is a readable regular file
// whose contents are not blank, and a warning when others can read or
// write it (group or world bits); with strict that is an errExposed error
// instead. Its errors and warnings never hold the contents.
func readKeyFile(path string, strict bool) (data []byte, warning string, err error) {
	data, perm, err := readRegular(path)
	if err != nil {
		return nil, "", err
	}
	if perm&0o077 != 0 {
		if strict {
			return nil, "", fmt.Errorf("%s has mode %04o: %w; run chmod 600 %s (%s is set)", path, perm, errExposed, path, StrictKeyFilesVar)
		}
		warning = fmt.Sprintf("warning: key file %s has mode %04o: others on this host can read it; run chmod 600 %s (%s=1 refuses such files)", path, perm, path, StrictKeyFilesVar)
	}
	return data, warning, nil
}

// readRegular returns the bytes and permission bits of a regular file
// whose contents are not blank.
func readRegular(path string) ([]byte, os.FileMode, error) {
	if path == "" {
		return nil, 0, errors.New("no path")
	}
	// A FIFO or device would block or never end: check before opening, open
	// without blocking, and check again what was opened.
	if fi, err := os.Stat(path); err != nil {
		return nil, 0, err
	} else if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	} else if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, 0, err
	}
	if len(data) > maxKeyFile {
		return nil, 0, fmt.Errorf("%s is larger than %d bytes", path, maxKeyFile)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, 0, fmt.Errorf("%s is empty", path)
	}
	return data, fi.Mode().Perm(), nil
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
