package sandbox

import (
	"context"
	"io"

	"github.com/berth-sh/berth/sandbox/driver"
)

// BuildImage builds spec.Build into an image of the provider and returns
// the reference a later Spec.Image names (driver.ImageBuilder); log, which
// may be nil, gets the steps and their output. spec's Resources, Network
// and TTL bound the build's sandbox where the provider runs one. A
// provider that builds only inside Create, or not at all, answers
// NotSupported.
func (p *Provider) BuildImage(ctx context.Context, spec Spec, log io.Writer) (string, error) {
	const op = "build image"
	end, err := p.begin(op, "")
	if err != nil {
		return "", err
	}
	defer end()
	if spec.Build == nil {
		return "", wrap(Errorf(InvalidArgument, "the spec has no build"), op, p.name, "")
	}
	if err := spec.Validate(); err != nil {
		return "", wrap(err, op, p.name, "")
	}
	spec = spec.WithDefaults()
	if err := p.checkSupported(spec); err != nil {
		return "", wrap(err, op, p.name, "")
	}
	b, ok := p.d.(driver.ImageBuilder)
	if !ok {
		return "", wrap(Errorf(NotSupported, "building an image apart from a sandbox is not supported"), op, p.name, "")
	}
	if log == nil {
		log = io.Discard
	}
	ref, err := b.BuildImage(ctx, spec, log)
	return ref, wrap(err, op, p.name, "")
}
