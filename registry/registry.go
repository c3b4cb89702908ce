package registry

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/berth-sh/berth/sandbox"
)

// Registry maps provider names to entries. It is safe for concurrent use and
// never hands out its internal maps.
type Registry struct {
	mu      sync.RWMutex
	entries map[string]Entry
	aliases map[string]string // alias -> canonical name
}

// New returns an empty registry.
func New() *Registry {
	return &Registry{entries: map[string]Entry{}, aliases: map[string]string{}}
}

// Default is the registry the berth binary and its commands use.
var Default = New()

// Register adds an entry. It panics on an empty name, a duplicate name or
// alias, or a missing factory or Capabilities function: those are
// programming errors found at start-up.
func (r *Registry) Register(e Entry) {
	if e.Name == "" || e.Name != strings.ToLower(strings.TrimSpace(e.Name)) {
		panic(fmt.Sprintf("registry: Register with invalid name %q", e.Name))
	}
	if e.Open == nil {
		panic("registry: Register " + e.Name + " without a factory")
	}
	if e.Capabilities == nil {
		panic("registry: Register " + e.Name + " without its driver's Capabilities function")
	}
	if err := e.check(); err != nil {
		panic("registry: Register " + e.Name + ": " + err.Error())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range append([]string{e.Name}, e.Aliases...) {
		if _, dup := r.entries[n]; dup {
			panic("registry: Register called twice for " + n)
		}
		if _, dup := r.aliases[n]; dup {
			panic("registry: Register called twice for " + n)
		}
	}
	e.Aliases = slices.Clone(e.Aliases)
	r.entries[e.Name] = e
	for _, a := range e.Aliases {
		r.aliases[a] = e.Name
	}
}

// Names returns the canonical names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.entries))
	for n := range r.entries {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Entries returns every entry, sorted by name.
func (r *Registry) Entries() []Entry {
	names := r.Names()
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Entry, 0, len(names))
	for _, n := range names {
		out = append(out, r.entries[n])
	}
	return out
}

// Lookup finds an entry by name or alias, trimmed and case-insensitive. An
// unknown name is a NotFound error that lists what is registered.
func (r *Registry) Lookup(name string) (Entry, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	r.mu.RLock()
	if c, ok := r.aliases[n]; ok {
		n = c
	}
	e, ok := r.entries[n]
	r.mu.RUnlock()
	if !ok {
		if len(name) > 64 {
			name = name[:64] + "..." // the name is user input; keep the error short
		}
		return Entry{}, sandbox.Errorf(sandbox.NotFound, "unknown backend %q (registered: %s)", name, r.namesWithAliases())
	}
	return e, nil
}

func (r *Registry) namesWithAliases() string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var parts []string
	for n, e := range r.entries {
		s := n
		if len(e.Aliases) > 0 {
			s += " (alias " + strings.Join(e.Aliases, ", ") + ")"
		}
		parts = append(parts, s)
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// Open resolves the worker-side credential of the named provider from env
// and opens it, wrapped in a sandbox.Provider under its canonical name.
func (r *Registry) Open(ctx context.Context, name string, env Environ, log *slog.Logger) (*sandbox.Provider, error) {
	e, err := r.Lookup(name)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	secrets, _, warning, err := e.resolve(env)
	if err != nil {
		return nil, err
	}
	if warning != "" {
		log.Warn(warning, "provider", e.Name)
	}
	d, err := e.Open(ctx, Config{Name: e.Name, Secrets: secrets, Env: e.workerEnv(env), Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", e.Name, err)
	}
	return sandbox.NewProvider(e.Name, d, sandbox.WithLogger(log)), nil
}
