package testimage

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Epoch is the modification time of every entry testimage writes, so that
// images built twice have the same digests.
var Epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Entry is one tar entry of a hand-made layer.
type Entry struct {
	Name string
	// Type is a tar type flag; zero means a regular file, or a directory
	// when Name ends in "/".
	Type byte
	Body string
	// Link is the target of a symlink or hardlink.
	Link string
	// Mode is the permission and setuid/setgid/sticky bits; zero means
	// 0644 for files, 0755 for directories, 0777 for symlinks.
	Mode     int64
	UID, GID int
	// PAX records, e.g. "SCHILY.xattr.user.k" for an xattr.
	PAX map[string]string
	// Devmajor and Devminor of a device node.
	Devmajor, Devminor int64
}

func (e Entry) header() *tar.Header {
	h := &tar.Header{
		Name:       e.Name,
		Typeflag:   e.Type,
		Linkname:   e.Link,
		Mode:       e.Mode,
		Uid:        e.UID,
		Gid:        e.GID,
		ModTime:    Epoch,
		PAXRecords: e.PAX,
		Devmajor:   e.Devmajor,
		Devminor:   e.Devminor,
		Format:     tar.FormatPAX,
	}
	if h.Typeflag == 0 {
		h.Typeflag = tar.TypeReg
		if strings.HasSuffix(e.Name, "/") {
			h.Typeflag = tar.TypeDir
		}
	}
	if h.Mode == 0 {
		switch h.Typeflag {
		case tar.TypeDir:
			h.Mode = 0o755
		case tar.TypeSymlink:
			h.Mode = 0o777
		default:
			h.Mode = 0o644
		}
	}
	if h.Typeflag == tar.TypeReg {
		h.Size = int64(len(e.Body))
	}
	return h
}

// TarBytes returns an uncompressed tar of entries, in order.
func TarBytes(t testing.TB, entries ...Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if err := tw.WriteHeader(e.header()); err != nil {
			t.Fatalf("testimage: tar header %q: %v", e.Name, err)
		}
		if e.Body != "" {
			if _, err := io.WriteString(tw, e.Body); err != nil {
				t.Fatalf("testimage: tar body %q: %v", e.Name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatalf("testimage: tar: %v", err)
	}
	return buf.Bytes()
}

// WriteTar writes a tar of entries to a file in a test temp dir (a plain
// rootfs tar, for import) and returns its path.
func WriteTar(t testing.TB, entries ...Entry) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rootfs.tar")
	if err := os.WriteFile(p, TarBytes(t, entries...), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Layer returns a gzip-compressed layer of entries.
func Layer(t testing.TB, entries ...Entry) v1.Layer {
	t.Helper()
	return layerOf(t, TarBytes(t, entries...))
}

func layerOf(t testing.TB, b []byte) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithCompressedCaching)
	if err != nil {
		t.Fatalf("testimage: layer: %v", err)
	}
	return l
}

// Image stacks layers (lowest first) into a linux image of this machine's
// architecture with cfg as its run config.
func Image(t testing.TB, cfg v1.Config, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatalf("testimage: image: %v", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatalf("testimage: image: %v", err)
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = goarch
	cf.Created = v1.Time{Time: Epoch}
	cf.Config = cfg
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatalf("testimage: image: %v", err)
	}
	return img
}
