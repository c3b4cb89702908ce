package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/sandbox/types"
)

// Overlayfs xattrs that mean the upper directory alone does not say what a
// path holds (a renamed directory, a file whose data is in a lower layer).
// berth's overlays mount without redirect_dir and metacopy, so a layer
// carrying them came from elsewhere and is refused rather than guessed at.
const (
	redirectXattr = "trusted.overlay.redirect"
	metacopyXattr = "trusted.overlay.metacopy"
)

// layerWriter writes an overlayfs upper directory as an OCI layer tar.
type layerWriter struct {
	ctx     context.Context
	dir     string
	root    *os.Root
	tw      *tar.Writer
	exclude func(string) bool
	links   map[[2]uint64]string // (dev, inode) -> first name, for hard links
	buf     []byte
}

// writeLayer writes the tree at dir to w as an uncompressed layer tar, in
// name order, converting overlayfs whiteouts back to OCI ones. Owners,
// modes, set-id bits, modification times, file capabilities and user.*
// xattrs are kept; trusted.* xattrs (overlayfs bookkeeping) are not.
// Sockets and device nodes other than whiteouts are left out: no image
// carries them.
func writeLayer(ctx context.Context, w io.Writer, dir string, exclude func(string) bool) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("layer directory: %w", err)
	}
	defer root.Close()
	lw := &layerWriter{
		ctx: ctx, dir: dir, root: root, tw: tar.NewWriter(w), exclude: exclude,
		links: map[[2]uint64]string{}, buf: make([]byte, 1<<20),
	}
	if err := lw.children(""); err != nil {
		return err
	}
	return lw.tw.Close()
}

// children writes the entries of the directory rel ("" for the top).
func (lw *layerWriter) children(rel string) error {
	d, err := lw.root.Open(rootRel(rel))
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, n := range names {
		if err := lw.ctx.Err(); err != nil {
			return err
		}
		p := path.Join(rel, n)
		if lw.exclude != nil && lw.exclude(p) {
			continue
		}
		if err := lw.entry(p); err != nil {
			return err
		}
	}
	return nil
}

func (lw *layerWriter) entry(p string) error {
	host := filepath.Join(lw.dir, filepath.FromSlash(p))
	var st unix.Stat_t
	if err := unix.Lstat(host, &st); err != nil {
		return fmt.Errorf("layer entry %s: %w", p, err)
	}
	hdr := &tar.Header{
		Name:    p,
		Mode:    int64(st.Mode & 0o7777),
		Uid:     int(st.Uid),
		Gid:     int(st.Gid),
		ModTime: time.Unix(st.Mtim.Unix()),
	}
	xattrs, err := lw.xattrs(host, p)
	if err != nil {
		return err
	}
	for k, v := range xattrs {
		if hdr.PAXRecords == nil {
			hdr.PAXRecords = map[string]string{}
		}
		hdr.PAXRecords["SCHILY.xattr."+k] = v
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		if st.Rdev != 0 {
			return nil // a device: sandboxes get theirs from the runtime
		}
		dir, base := path.Split(p)
		return lw.write(&tar.Header{Name: dir + whiteoutPrefix + base, Typeflag: tar.TypeReg, ModTime: hdr.ModTime}, nil)
	case unix.S_IFDIR:
		hdr.Typeflag, hdr.Name = tar.TypeDir, p+"/"
		opaque := make([]byte, 4)
		n, err := unix.Lgetxattr(host, opaqueXattr, opaque)
		if err := lw.write(hdr, nil); err != nil {
			return err
		}
		if err == nil && string(opaque[:n]) == "y" {
			if err := lw.write(&tar.Header{Name: p + "/" + whiteoutOpaque, Typeflag: tar.TypeReg, ModTime: hdr.ModTime}, nil); err != nil {
				return err
			}
		}
		return lw.children(p)
	case unix.S_IFLNK:
		target, err := os.Readlink(host)
		if err != nil {
			return fmt.Errorf("layer entry %s: %w", p, err)
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		return lw.write(hdr, nil)
	case unix.S_IFIFO:
		hdr.Typeflag = tar.TypeFifo
		return lw.write(hdr, nil)
	case unix.S_IFREG:
		if st.Nlink > 1 {
			key := [2]uint64{uint64(st.Dev), st.Ino}
			if first, ok := lw.links[key]; ok {
				hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
				return lw.write(hdr, nil)
			}
			lw.links[key] = p
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
		f, err := lw.root.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
		if err != nil {
			return fmt.Errorf("layer entry %s: %w", p, err)
		}
		defer f.Close()
		return lw.write(hdr, f)
	}
	return nil // a socket: meaningless in an image
}

// write writes one header and, for a regular file, exactly its size from r.
func (lw *layerWriter) write(hdr *tar.Header, r io.Reader) error {
	if err := lw.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("layer entry %s: %w", hdr.Name, err)
	}
	if r == nil || hdr.Size == 0 {
		return nil
	}
	n, err := io.CopyBuffer(lw.tw, io.LimitReader(r, hdr.Size), lw.buf)
	if err == nil && n != hdr.Size {
		err = fmt.Errorf("file changed size while it was read (%d of %d bytes)", n, hdr.Size)
	}
	if err != nil {
		return fmt.Errorf("layer entry %s: %w", hdr.Name, err)
	}
	return nil
}

// xattrs returns the xattrs of host that go into the layer, refusing the
// overlayfs ones that the upper directory cannot stand for alone.
func (lw *layerWriter) xattrs(host, p string) (map[string]string, error) {
	names, err := listXattrs(host)
	if err != nil {
		return nil, fmt.Errorf("layer entry %s: %w", p, err)
	}
	var out map[string]string
	for _, name := range names {
		switch {
		case name == redirectXattr, name == metacopyXattr:
			return nil, types.Errorf(types.NotSupported, "layer entry %s: overlayfs %s (a redirect_dir or metacopy mount) cannot be committed as a layer", p, name)
		case name == "security.capability", strings.HasPrefix(name, "user."):
			v, err := getXattr(host, name)
			if err != nil {
				return nil, fmt.Errorf("layer entry %s: %w", p, err)
			}
			if out == nil {
				out = map[string]string{}
			}
			out[name] = v
		}
	}
	return out, nil
}

func listXattrs(host string) ([]string, error) {
	buf := make([]byte, 1024)
	for {
		n, err := unix.Llistxattr(host, buf)
		if errors.Is(err, unix.ERANGE) && len(buf) < 1<<20 {
			buf = make([]byte, len(buf)*4)
			continue
		}
		if errors.Is(err, unix.ENOTSUP) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		var names []string
		for _, s := range strings.Split(string(buf[:n]), "\x00") {
			if s != "" {
				names = append(names, s)
			}
		}
		sort.Strings(names)
		return names, nil
	}
}

func getXattr(host, name string) (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Lgetxattr(host, name, buf)
		if errors.Is(err, unix.ERANGE) && len(buf) < 1<<20 {
			buf = make([]byte, len(buf)*4)
			continue
		}
		if err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
}
