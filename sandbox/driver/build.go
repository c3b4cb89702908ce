package driver

import (
	"context"
	"io"
)

// ImageBuilder is implemented by drivers that build a Spec's Build into an
// image of their own apart from creating a sandbox, so that a server can
// build once and create many sandboxes from the result (berth serve's
// template builds). BuildImage returns a reference that a later Spec.Image
// of this provider names; building what is already built is a cache hit
// that starts nothing. log gets the build as a person reads it (steps and
// their output); the driver never blocks on it failing.
type ImageBuilder interface {
	BuildImage(ctx context.Context, spec Spec, log io.Writer) (ref string, err error)
}
