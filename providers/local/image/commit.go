package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// CommitSpec is a new image made of a stored image and one directory of
// changes on top of it, as a builder makes after running a step.
type CommitSpec struct {
	// Ref is the reference the new image is stored under.
	Ref string
	// Parent is the stored image the changes apply to (from Resolve).
	Parent Image
	// Dir holds the changes in overlayfs upper-directory form: whiteouts
	// are 0:0 character devices and opaque directories carry
	// trusted.overlay.opaque=y. "" adds no layer: the new image has the
	// parent's layers and Config.
	Dir string
	// Exclude, when set, leaves out an entry of Dir (a slash path relative
	// to it, e.g. "etc/hosts") and everything under it.
	Exclude func(name string) bool
	// Config is the new image's config. Empty OS and Architecture are taken
	// from the parent.
	Config Config
}

// Commit stores c as an image and returns it. Dir is turned into an OCI
// layer tar (whiteouts as .wh. entries, the opaque marker as .wh..wh..opq),
// whose digest is the layer's diff ID, and unpacked into the layers
// directory like any pulled layer, so the stored image is an ordinary one.
// Dir is only read; it must not change during the call.
func (s *Store) Commit(ctx context.Context, c CommitSpec) (Image, error) {
	r, err := s.parse(c.Ref)
	if err != nil {
		return Image{}, err
	}
	unlock, err := s.holdLayers()
	if err != nil {
		return Image{}, err
	}
	defer unlock()
	for _, d := range c.Parent.DiffIDs {
		dir, err := s.layerPath(d)
		if err != nil {
			return Image{}, err
		}
		if !isDir(dir) {
			return Image{}, errdefs.Errorf(errdefs.NotFound, "commit %s: layer %s of the parent image %s is missing", r.Name(), d, c.Parent.Ref)
		}
	}
	diffIDs := slices.Clone(c.Parent.DiffIDs)
	if c.Dir != "" {
		d, err := s.ensureLayer(ctx, layerSource{open: func() (io.ReadCloser, error) {
			pr, pw := io.Pipe()
			go func() { pw.CloseWithError(writeLayer(ctx, pw, c.Dir, c.Exclude)) }()
			return pr, nil
		}})
		if err != nil {
			return Image{}, commitError(r.Name(), err)
		}
		diffIDs = append(diffIDs, d)
	}
	cfg := c.Config
	if cfg.OS == "" && cfg.Architecture == "" {
		cfg.OS, cfg.Architecture, cfg.Variant = c.Parent.Config.OS, c.Parent.Config.Architecture, c.Parent.Config.Variant
	}
	id, err := configID(cfg, diffIDs)
	if err != nil {
		return Image{}, err
	}
	return s.put(Image{Ref: r.Name(), ID: id, Config: cfg, DiffIDs: diffIDs})
}

// commitError names the image; a failure without a class of its own (a
// read error in the directory) stays unclassed, as the local file system's
// are elsewhere in the store.
func commitError(ref string, err error) error {
	var se *sourceError
	if errors.As(err, &se) && errdefs.ClassOf(err) == errdefs.Unknown {
		err = se.err
	}
	return fmt.Errorf("commit %s: %w", ref, err)
}

// configID is the digest of the OCI config the image would have, so that
// two images with the same layers and config share an ID.
func configID(c Config, diffIDs []string) (string, error) {
	cf := v1.ConfigFile{
		OS:           c.OS,
		Architecture: c.Architecture,
		Variant:      c.Variant,
		Config: v1.Config{
			Env: c.Env, WorkingDir: c.WorkingDir, User: c.User,
			Entrypoint: c.Entrypoint, Cmd: c.Cmd, Labels: c.Labels, StopSignal: c.StopSignal,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	for _, d := range diffIDs {
		cf.RootFS.DiffIDs = append(cf.RootFS.DiffIDs, v1.Hash{Algorithm: "sha256", Hex: strings.TrimPrefix(d, "sha256:")})
	}
	b, err := json.Marshal(cf)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}
