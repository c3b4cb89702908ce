package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/berth-sh/berth/providers/local/image"
	"github.com/berth-sh/berth/providers/local/image/seed"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// DefaultImage is the image tasks that name none run on (the smoke runner's
// built-in task). It is in no registry: the provider seeds it offline from
// the host's busybox-static the first time it is asked for.
const DefaultImage = "berth.local/busybox:latest"

// isDefaultImage reports whether ref names DefaultImage.
func isDefaultImage(ref string) bool {
	return ref == DefaultImage || ref == strings.TrimSuffix(DefaultImage, ":latest")
}

// PrepareImage makes the Spec's image ready: stored and unpacked, pulled
// if absent (under spec.Pull), seeded if it is DefaultImage, built if the
// Spec has a Build (package imagebuild).
func (p *Provider) PrepareImage(ctx context.Context, spec driver.Spec) error {
	if spec.Build != nil {
		_, err := p.builder(spec.Pull).Build(ctx, spec)
		return err
	}
	_, err := p.ensureImage(ctx, spec.Image, spec.Pull)
	return err
}

// ensureImage resolves ref, pulling (under policy pull, when set) or
// seeding it when the store lacks it.
func (p *Provider) ensureImage(ctx context.Context, ref string, pull *driver.PullPolicy) (image.Image, error) {
	img, err := p.store.Resolve(ctx, ref)
	if errdefs.ClassOf(err) != errdefs.NotFound {
		return img, err
	}
	if isDefaultImage(ref) {
		return p.seedDefault(ctx)
	}
	p.log.Info("pulling image", "image", ref, "guarded", pull != nil)
	img, err = p.store.PullWith(ctx, ref, image.PullOptions{Policy: pull})
	if err != nil {
		var pe *image.PullError
		if errors.As(err, &pe) { // the client reads less; the operator's log has it all
			p.log.Warn("pulling an image a client named failed", "image", ref, "error", pe.Detail)
		}
		return img, fmt.Errorf("image %s: %w", ref, err)
	}
	return img, nil
}

// seedDefault builds DefaultImage from the host's busybox and imports it.
func (p *Provider) seedDefault(ctx context.Context) (image.Image, error) {
	p.seedMu.Lock()
	defer p.seedMu.Unlock()
	if img, err := p.store.Resolve(ctx, DefaultImage); err == nil {
		return img, nil // seeded while we waited
	}
	bin, err := seed.FindBusybox()
	if err != nil {
		return image.Image{}, fmt.Errorf("seed %s: %w", DefaultImage, err)
	}
	p.log.Info(fmt.Sprintf("seeding image %s offline from the host's %s (Debian busybox-static)", DefaultImage, bin))
	f, err := os.CreateTemp(p.state, "seed-*.tar")
	if err != nil {
		return image.Image{}, fmt.Errorf("seed %s: %w", DefaultImage, err)
	}
	defer os.Remove(f.Name())
	err = seed.BusyboxTar(f, bin)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return image.Image{}, fmt.Errorf("seed %s: %w", DefaultImage, err)
	}
	return p.store.Import(ctx, DefaultImage, f.Name())
}

// RemoveImage removes ref from the image store in stateDir, refusing
// (InvalidArgument, naming them) while live sandboxes run on it: their
// overlay stacks its layers. Ended sandboxes are cleaned up first.
func RemoveImage(ctx context.Context, o Options, ref string) error {
	p, err := New(o)
	if err != nil {
		return err
	}
	defer p.Close()
	img, err := p.store.Resolve(ctx, ref)
	if err != nil {
		return err
	}
	infos, err := p.List(ctx, nil)
	if err != nil {
		return err
	}
	var users []string
	for _, in := range infos {
		m, err := p.readMeta(in.ID)
		if err != nil {
			continue
		}
		if m.Image == img.Ref || m.ImageID == img.ID {
			users = append(users, in.ID)
		}
	}
	if len(users) > 0 {
		return errdefs.Errorf(errdefs.InvalidArgument, "image %s is used by live sandboxes %s; remove them first (berth sandboxes rm)", img.Ref, strings.Join(users, ", "))
	}
	return p.store.Remove(ctx, ref)
}
