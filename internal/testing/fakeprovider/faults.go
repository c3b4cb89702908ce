package fakeprovider

import (
	"sync"
	"time"
)

// Faults are the failures a provider injects. The zero value injects none.
type Faults struct {
	// FailCreate, when set, is returned by Create; nothing is created.
	FailCreate error
	// CreateDelay makes Create wait this long before it makes the sandbox,
	// whatever ctx does, like a remote API whose request is already on its
	// way: the sandbox appears even when the caller gave up meanwhile.
	CreateDelay time.Duration
	// HangExec makes Exec, and Wait on any process, block until their ctx
	// ends and return ctx's error.
	HangExec bool
	// DropStream cuts stdout after the first chunk of output (or at exit if
	// there was none): the rest is discarded and Wait returns an Unavailable
	// error at once, while the process goes on running in the sandbox.
	DropStream bool
	// FailDelete, when set, is returned by Delete; the sandbox stays.
	FailDelete error
}

// Injector holds the Faults of one or more providers and lets a test change
// them while calls are in flight. A nil *Injector injects nothing.
type Injector struct {
	mu sync.RWMutex
	f  Faults
}

// NewInjector returns an Injector starting with f.
func NewInjector(f Faults) *Injector { return &Injector{f: f} }

// Set replaces the faults.
func (i *Injector) Set(f Faults) {
	i.mu.Lock()
	i.f = f
	i.mu.Unlock()
}

// Update changes the faults in place, e.g. to clear one of them.
func (i *Injector) Update(fn func(*Faults)) {
	i.mu.Lock()
	fn(&i.f)
	i.mu.Unlock()
}

// Get returns the current faults.
func (i *Injector) Get() Faults {
	if i == nil {
		return Faults{}
	}
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.f
}
