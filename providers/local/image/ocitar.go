package image

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// An OCI layout tarball is read in place, without unpacking it to disk
// first: each blob is found by scanning the archive (which seeks over the
// other entries when the archive is not compressed).

// maxMetaBlob bounds index, manifest and config blobs, which are read into
// memory.
const maxMetaBlob = 8 << 20

// refNameAnnotation names an image in an OCI layout's index.
const refNameAnnotation = "org.opencontainers.image.ref.name"

type tarBlobs struct {
	open func() (io.ReadCloser, error)
}

// file returns the entry named p (a clean path) as a stream.
func (t tarBlobs) file(p string) (io.ReadCloser, error) {
	rc, err := t.open()
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			rc.Close()
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "%s is missing from the archive", p)
		}
		if err != nil {
			rc.Close()
			return nil, &sourceError{err}
		}
		if path.Clean(strings.TrimPrefix(hdr.Name, "./")) == p && hdr.Typeflag == tar.TypeReg {
			return readCloser{tr, rc.Close}, nil
		}
	}
}

func blobPath(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

// small reads a metadata entry whole, bounded, checking its digest when
// want is set.
func (t tarBlobs) small(p string, want *v1.Hash) ([]byte, error) {
	rc, err := t.file(p)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxMetaBlob+1))
	if err != nil {
		return nil, &sourceError{err}
	}
	if len(b) > maxMetaBlob {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "%s is larger than %d bytes", p, maxMetaBlob)
	}
	if want != nil {
		sum := sha256.Sum256(b)
		if want.Algorithm != "sha256" || hex.EncodeToString(sum[:]) != want.Hex {
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "%s does not match its digest", p)
		}
	}
	return b, nil
}

// ociImage picks the image for r from the layout's index: the one whose
// ref.name annotation names r (in full or by tag), or the only one; an
// index found on the way is resolved for platform. It returns the image and
// its manifest digest.
func ociImage(r name.Reference, blobs tarBlobs, platform v1.Platform) (v1.Image, string, error) {
	b, err := blobs.small("index.json", nil)
	if err != nil {
		return nil, "", err
	}
	im, err := v1.ParseIndexManifest(bytes.NewReader(b))
	if err != nil {
		return nil, "", &sourceError{fmt.Errorf("index.json: %w", err)}
	}
	desc, err := pickByRef(r, im.Manifests)
	if err != nil {
		return nil, "", err
	}
	for depth := 0; desc.MediaType.IsIndex(); depth++ {
		if depth > 4 {
			return nil, "", errdefs.Errorf(errdefs.InvalidArgument, "image indexes nested too deep")
		}
		b, err := blobs.small(blobPath(desc.Digest), &desc.Digest)
		if err != nil {
			return nil, "", err
		}
		child, err := v1.ParseIndexManifest(bytes.NewReader(b))
		if err != nil {
			return nil, "", &sourceError{fmt.Errorf("index %s: %w", desc.Digest, err)}
		}
		if desc, err = pickPlatform(child.Manifests, platform); err != nil {
			return nil, "", err
		}
	}
	if !desc.MediaType.IsImage() {
		return nil, "", errdefs.Errorf(errdefs.InvalidArgument, "index entry %s is a %s, not an image", desc.Digest, desc.MediaType)
	}
	raw, err := blobs.small(blobPath(desc.Digest), &desc.Digest)
	if err != nil {
		return nil, "", err
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, "", &sourceError{fmt.Errorf("manifest %s: %w", desc.Digest, err)}
	}
	img, err := partial.CompressedToImage(&ociTarImage{blobs: blobs, raw: raw, manifest: m, mediaType: desc.MediaType})
	if err != nil {
		return nil, "", &sourceError{err}
	}
	return img, desc.Digest.String(), nil
}

func pickByRef(r name.Reference, ds []v1.Descriptor) (v1.Descriptor, error) {
	var named []string
	for _, d := range ds {
		ann := d.Annotations[refNameAnnotation]
		if ann == "" {
			continue
		}
		named = append(named, ann)
		if ann == r.Identifier() || ann == r.String() {
			return d, nil
		}
		if ar, err := name.ParseReference(ann); err == nil && ar.Name() == r.Name() {
			return d, nil
		}
	}
	if len(ds) == 1 {
		return ds[0], nil
	}
	return v1.Descriptor{}, errdefs.Errorf(errdefs.InvalidArgument,
		"the layout holds %d entries and none is named %s (names: %s)", len(ds), r.String(), strings.Join(named, ", "))
}

func pickPlatform(ds []v1.Descriptor, want v1.Platform) (v1.Descriptor, error) {
	for _, d := range ds {
		if d.Platform != nil && d.Platform.Satisfies(want) {
			return d, nil
		}
	}
	if len(ds) == 1 && ds[0].Platform == nil {
		return ds[0], nil
	}
	return v1.Descriptor{}, errdefs.Errorf(errdefs.NotFound, "the index has no image for %s", want.String())
}

// ociTarImage is an image read from an OCI layout tarball.
type ociTarImage struct {
	blobs     tarBlobs
	raw       []byte
	manifest  *v1.Manifest
	mediaType types.MediaType
}

var _ partial.CompressedImageCore = (*ociTarImage)(nil)

func (i *ociTarImage) RawConfigFile() ([]byte, error) {
	return i.blobs.small(blobPath(i.manifest.Config.Digest), &i.manifest.Config.Digest)
}

func (i *ociTarImage) MediaType() (types.MediaType, error) { return i.mediaType, nil }

func (i *ociTarImage) RawManifest() ([]byte, error) { return i.raw, nil }

func (i *ociTarImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	for _, d := range i.manifest.Layers {
		if d.Digest == h {
			return &ociTarLayer{blobs: i.blobs, desc: d}, nil
		}
	}
	return nil, errdefs.Errorf(errdefs.InvalidArgument, "manifest has no layer %s", h)
}

// ociTarLayer is one layer blob in the archive. Its content is checked
// against the config's diff ID while it is unpacked.
type ociTarLayer struct {
	blobs tarBlobs
	desc  v1.Descriptor
}

var _ partial.CompressedLayer = (*ociTarLayer)(nil)

func (l *ociTarLayer) Digest() (v1.Hash, error)            { return l.desc.Digest, nil }
func (l *ociTarLayer) Size() (int64, error)                { return l.desc.Size, nil }
func (l *ociTarLayer) MediaType() (types.MediaType, error) { return l.desc.MediaType, nil }
func (l *ociTarLayer) Compressed() (io.ReadCloser, error) {
	return l.blobs.file(blobPath(l.desc.Digest))
}
