package builtin

import (
	"github.com/berth-sh/berth/registry"
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
	return []registry.Entry{local(), e2b(), daytona(), k8s(), modal()}
}

// keyFileHint is the provision command for a provider whose key file holds
// one key: it reads the key from a prompt (never argv, never shell history)
// and writes it with mode 600.
func keyFileHint(dir, file, prompt string) string {
	return "mkdir -p " + dir + " && (umask 077; read -rsp '" + prompt + ": ' k && printf '%s\\n' \"$k\" > " + file + ") && chmod 600 " + file
}
