package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/klauspost/compress/zstd"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Kinds of tarball Import understands.
type archiveKind int

const (
	kindRootfs archiveKind = iota // a plain file system tree: one layer
	kindDocker                    // `docker save`: manifest.json (Docker 25+ adds an OCI layout)
	kindOCI                       // an OCI image layout: oci-layout, index.json, blobs/
)

func (k archiveKind) String() string {
	return [...]string{"rootfs tar", "docker-save tarball", "OCI layout tarball"}[k]
}

// defaultPath is the PATH a plain rootfs import gets, as Docker sets it.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Import stores the image in the tarball at file under ref. The tarball may
// be a `docker save` archive, an OCI image layout, or a plain rootfs tree;
// any of them may be gzip- or zstd-compressed. An archive holding several
// images is searched for ref.
func (s *Store) Import(ctx context.Context, ref, file string) (Image, error) {
	r, err := s.parse(ref)
	if err != nil {
		return Image{}, err
	}
	img, err := s.importFile(ctx, r, file)
	if err != nil {
		return Image{}, fmt.Errorf("import %s: %w", file, err)
	}
	return img, nil
}

func (s *Store) importFile(ctx context.Context, r name.Reference, file string) (Image, error) {
	if _, err := os.Stat(file); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Image{}, errdefs.Errorf(errdefs.NotFound, "no such file")
		}
		return Image{}, err
	}
	kind, err := detect(file)
	if err != nil {
		return Image{}, err
	}
	unlock, err := s.holdLayers()
	if err != nil {
		return Image{}, err
	}
	defer unlock()
	opener := func() (io.ReadCloser, error) { return openArchive(file) }
	var img Image
	switch kind {
	case kindRootfs:
		img, err = s.importRootfs(ctx, r, opener)
	case kindDocker:
		var v1img v1.Image
		if v1img, err = dockerImage(r, opener); err == nil {
			img, err = s.add(ctx, r.Name(), v1img, "")
		}
	case kindOCI:
		var v1img v1.Image
		var digest string
		if v1img, digest, err = ociImage(r, tarBlobs{open: opener}, s.platform); err == nil {
			img, err = s.add(ctx, r.Name(), v1img, digest)
		}
	}
	if err != nil {
		return Image{}, classifyLayerError(err, errdefs.InvalidArgument, fmt.Sprintf("corrupt %s", kind))
	}
	return img, nil
}

// importRootfs stores a plain tree as a one-layer image with a minimal
// config, as `docker import` does.
func (s *Store) importRootfs(ctx context.Context, r name.Reference, open func() (io.ReadCloser, error)) (Image, error) {
	diffID, err := s.ensureLayer(ctx, layerSource{open: open})
	if err != nil {
		return Image{}, err
	}
	cf := v1.ConfigFile{
		OS:           s.platform.OS,
		Architecture: s.platform.Architecture,
		Variant:      s.platform.Variant,
		Config:       v1.Config{Env: []string{defaultPath}},
		RootFS:       v1.RootFS{Type: "layers", DiffIDs: []v1.Hash{{Algorithm: "sha256", Hex: strings.TrimPrefix(diffID, "sha256:")}}},
	}
	b, err := json.Marshal(cf)
	if err != nil {
		return Image{}, err
	}
	sum := sha256.Sum256(b)
	return s.put(Image{
		Ref:     r.Name(),
		ID:      "sha256:" + hex.EncodeToString(sum[:]),
		Config:  configOf(&cf),
		DiffIDs: []string{diffID},
	})
}

// dockerImage opens the image for r in a docker-save archive: the one
// tagged r, or the only one.
func dockerImage(r name.Reference, open tarball.Opener) (v1.Image, error) {
	m, err := tarball.LoadManifest(open)
	if err != nil {
		return nil, &sourceError{fmt.Errorf("manifest.json: %w", err)}
	}
	var tag *name.Tag
	if t, ok := r.(name.Tag); ok && len(m) > 1 {
		tag = &t
	}
	if tag == nil && len(m) != 1 {
		var all []string
		for _, d := range m {
			all = append(all, d.RepoTags...)
		}
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "the archive holds %d images (%s); import one by its tag", len(m), strings.Join(all, ", "))
	}
	if tag != nil && !hasTag(m, *tag) {
		return nil, errdefs.Errorf(errdefs.NotFound, "the archive has no image tagged %s", r.String())
	}
	img, err := tarball.Image(open, tag)
	if err != nil {
		return nil, &sourceError{err}
	}
	return img, nil
}

func hasTag(m tarball.Manifest, tag name.Tag) bool {
	for _, d := range m {
		for _, t := range d.RepoTags {
			if rt, err := name.NewTag(t); err == nil && rt.Name() == tag.Name() {
				return true
			}
		}
	}
	return false
}

// detect tells the kind of archive at file from its top-level names.
func detect(file string) (archiveKind, error) {
	rc, err := openArchive(file)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var n int
	var oci, docker bool
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, errdefs.Errorf(errdefs.InvalidArgument, "not a readable tar archive: %w", err)
		}
		n++
		switch path.Clean(strings.TrimPrefix(hdr.Name, "./")) {
		case "manifest.json":
			docker = true
		case "oci-layout":
			oci = true
		}
	}
	switch {
	case n == 0:
		return 0, errdefs.Errorf(errdefs.InvalidArgument, "empty archive")
	case docker:
		return kindDocker, nil
	case oci:
		return kindOCI, nil
	}
	return kindRootfs, nil
}

// openArchive opens file, undoing gzip or zstd compression.
func openArchive(file string) (io.ReadCloser, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(f, 64<<10)
	magic, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "bad gzip stream: %w", err)
		}
		return readCloser{zr, func() error { zr.Close(); return f.Close() }}, nil
	case bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(br)
		if err != nil {
			f.Close()
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "bad zstd stream: %w", err)
		}
		return readCloser{zr, func() error { zr.Close(); return f.Close() }}, nil
	}
	// Uncompressed: hand out the file itself, so the tar reader can seek
	// past the entries it skips.
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }
