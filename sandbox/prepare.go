package sandbox

import (
	"context"

	"github.com/berth-sh/berth/sandbox/driver"
)

// PrepareImage fetches or builds the Spec's image ahead of Create where the
// provider can (driver.ImagePreparer); elsewhere it only validates the Spec
// and Create does the work.
func (p *Provider) PrepareImage(ctx context.Context, spec Spec) error {
	const op = "prepare image"
	if err := p.checkOpen(op, ""); err != nil {
		return err
	}
	if err := spec.Validate(); err != nil {
		return wrap(err, op, p.name, "")
	}
	ip, ok := p.d.(driver.ImagePreparer)
	if !ok {
		return nil
	}
	return wrap(ip.PrepareImage(ctx, spec.WithDefaults()), op, p.name, "")
}
