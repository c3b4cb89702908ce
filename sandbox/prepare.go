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
	end, err := p.begin(op, "")
	if err != nil {
		return err
	}
	defer end()
	if err := spec.Validate(); err != nil {
		return wrap(err, op, p.name, "")
	}
	ip, ok := p.d.(driver.ImagePreparer)
	if !ok {
		return nil
	}
	return wrap(ip.PrepareImage(ctx, spec.WithDefaults()), op, p.name, "")
}

// Reap removes what expired or dead sandboxes left behind where the driver
// keeps such state (driver.Reaper), and returns their IDs. Elsewhere the
// provider's own TTL does this and Reap returns nothing.
func (p *Provider) Reap(ctx context.Context) ([]string, error) {
	const op = "reap"
	end, err := p.begin(op, "")
	if err != nil {
		return nil, err
	}
	defer end()
	r, ok := p.d.(driver.Reaper)
	if !ok {
		return nil, nil
	}
	ids, err := r.Reap(ctx)
	return ids, wrap(err, op, p.name, "")
}
