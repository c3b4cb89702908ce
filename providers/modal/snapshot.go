package modal

import (
	"context"
	"regexp"

	sdk "github.com/modal-labs/modal-client/go"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

var _ driver.Snapshotter = (*sandbox)(nil)

// ImagePrefix marks a Spec.Image that names a Modal image by ID, as
// Snapshot returns them: "modal-image:im-...".
const ImagePrefix = "modal-image:"

// imageID is the form of Modal's object IDs.
var imageID = regexp.MustCompile(`^im-[A-Za-z0-9]{1,64}$`)

// Snapshot saves the sandbox's file system as a Modal image (the SDK's
// SnapshotFilesystem; Modal keeps it 30 days) and returns its reference, a
// Spec.Image that starts new sandboxes from it.
func (s *sandbox) Snapshot(ctx context.Context) (string, error) {
	img, err := s.sb.SnapshotFilesystem(ctx, nil)
	if err != nil {
		return "", classify(err)
	}
	return ImagePrefix + img.ImageID, nil
}

// imageByID looks an image up by ID: one that does not exist (or has
// expired) is NotFound.
func (p *Provider) imageByID(ctx context.Context, id string) (*sdk.Image, error) {
	if !imageID.MatchString(id) {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "%q is not a Modal image ID (im-...)", id)
	}
	img, err := p.client.Images.FromID(ctx, id, nil)
	if err != nil {
		return nil, classify(err)
	}
	return img, nil
}
