package registry

import (
	"os"
	"path/filepath"
	"strings"
)

// Environ is the environment credential code reads: variables and the home
// directory. Tests build one from a map; the binary uses OSEnviron.
type Environ struct {
	Lookup func(name string) (string, bool)
	Home   string
}

// OSEnviron reads the process environment and $HOME.
func OSEnviron() Environ {
	home, _ := os.UserHomeDir()
	return Environ{Lookup: os.LookupEnv, Home: home}
}

// MapEnviron builds an Environ from a map, for tests and servers.
func MapEnviron(vars map[string]string, home string) Environ {
	return Environ{
		Lookup: func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
		Home:   home,
	}
}

// With returns e with vars set on top (for a launcher's own knobs).
func (e Environ) With(vars map[string]string) Environ {
	base := e.Lookup
	return Environ{Home: e.Home, Lookup: func(k string) (string, bool) {
		if v, ok := vars[k]; ok {
			return v, true
		}
		if base == nil {
			return "", false
		}
		return base(k)
	}}
}

// PoolSizeVar asks a provider that can keep sandboxes started ahead of
// Create (the local provider) to keep this many ready. The local entry
// defaults it to 2; berth's one-shot commands set it to 0, since
// a pool they never use is wasted work, and berth serve to its --pool.
const PoolSizeVar = "BERTH_POOL_SIZE"

// Get returns the variable's value, "" when unset.
func (e Environ) Get(name string) string {
	if e.Lookup == nil {
		return ""
	}
	v, _ := e.Lookup(name)
	return v
}

// Set reports whether the variable is set to a non-blank value.
func (e Environ) Set(name string) bool { return strings.TrimSpace(e.Get(name)) != "" }

// ExpandHome turns a leading "~/" into the home directory.
func (e Environ) ExpandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok && e.Home != "" {
		return filepath.Join(e.Home, rest)
	}
	return p
}
