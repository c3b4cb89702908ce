package builtin

import (
	"context"

	"github.com/berth-sh/berth/providers/notyet"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/types"
)

// Register adds every built-in provider to r. It panics if one is already
// registered there (see registry.Register).
func Register(r *registry.Registry) {
	for _, e := range Entries() {
		r.Register(e)
	}
}

// Registry returns a fresh registry holding every built-in provider.
func Registry() *registry.Registry {
	r := registry.New()
	Register(r)
	return r
}

// Entries returns the built-in entries, sorted by name. Each call builds new
// values, so a caller may change what it gets.
func Entries() []registry.Entry {
	es := []registry.Entry{local(), e2b(), daytona(), k8s(), modal()}
	for i := range es {
		if es[i].Open == nil {
			es[i].Open = placeholder(es[i].Capabilities)
		}
	}
	return es
}

// placeholder opens the shared not-yet driver for an entry whose real driver
// has not landed; its credential has already been resolved by then.
func placeholder(caps types.Capabilities) registry.Factory {
	return func(_ context.Context, cfg registry.Config) (driver.Provider, error) {
		return notyet.New(cfg.Name, caps), nil
	}
}

// keyFileHint is the provision command for a provider whose key file holds
// one key: it reads the key from a prompt (never argv, never shell history)
// and writes it with mode 600.
func keyFileHint(dir, file, prompt string) string {
	return "mkdir -p " + dir + " && (umask 077; read -rsp '" + prompt + ": ' k && printf '%s\\n' \"$k\" > " + file + ") && chmod 600 " + file
}
