// Package notyet is the placeholder driver of a registered provider whose
// real driver has not landed: every operation fails with NotSupported and a
// sentence that says so, while the provider's registry entry (credential,
// forwarding, capabilities) is already complete. Package builtin imports it;
// nothing else should.
package notyet

import (
	"context"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/types"
)

var _ driver.Provider = (*Provider)(nil)

// Provider is the placeholder driver. It is the same for every provider; only
// the name and the capabilities it reports differ.
type Provider struct {
	name string
	caps types.Capabilities
}

// New returns the placeholder driver for the named provider.
func New(name string, caps types.Capabilities) *Provider {
	return &Provider{name: name, caps: caps}
}

func (p *Provider) err() error {
	return types.Errorf(types.NotSupported, "the %s driver has not landed yet; credential handling is complete", p.name)
}

// Create always fails with NotSupported.
func (p *Provider) Create(context.Context, types.Spec) (driver.Sandbox, error) { return nil, p.err() }

// Connect always fails with NotSupported.
func (p *Provider) Connect(context.Context, string) (driver.Sandbox, error) { return nil, p.err() }

// List always fails with NotSupported: an empty list would tell a reaper
// that nothing is left running, which it cannot know.
func (p *Provider) List(context.Context, map[string]string) ([]types.Info, error) {
	return nil, p.err()
}

// Delete always fails with NotSupported.
func (p *Provider) Delete(context.Context, string) error { return p.err() }

// Capabilities reports the capabilities of the provider's registry entry.
func (p *Provider) Capabilities() types.Capabilities { return p.caps }

// Close has nothing to release.
func (p *Provider) Close() error { return nil }
