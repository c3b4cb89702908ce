package image

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/dirfd"
	"github.com/berth-sh/berth/sandbox/errdefs"
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
// The directory is a sandbox's: a process in it may rename, swap and
// relink anything while the host reads. So the walk holds each directory
// by its fd (package dirfd) and acts on one name in it at a time, never
// following that name: a directory swapped for a symlink to a host
// directory after it was listed is refused (or already held open), and no
// lstat, readlink, xattr or open of the host's tree happens through it.
type layerWriter struct {
	ctx     context.Context
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
	root, err := dirfd.Open(dir, dirfd.Beneath)
	if err != nil {
		return fmt.Errorf("layer directory: %w", err)
	}
	defer root.Close()
	lw := &layerWriter{
		ctx: ctx, tw: tar.NewWriter(w), exclude: exclude,
		links: map[[2]uint64]string{}, buf: make([]byte, 1<<20),
	}
	if err := lw.children(&root.Dir, ""); err != nil {
		return err
	}
	return lw.tw.Close()
}

// children writes the entries of the open directory d, at rel ("" for
// the top).
func (lw *layerWriter) children(d *dirfd.Dir, rel string) error {
	names, err := d.Names()
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
		if err := lw.entry(d, n, p); err != nil {
			return err
		}
	}
	return nil
}

// entry writes the entry name of the directory d, whose path in the layer
// is p.
func (lw *layerWriter) entry(d *dirfd.Dir, name, p string) error {
	st, err := d.Lstat(name)
	if err != nil {
		return fmt.Errorf("layer entry %s: %w", p, err)
	}
	hdr := &tar.Header{
		Name:    p,
		Mode:    int64(st.Mode & 0o7777),
		Uid:     int(st.Uid),
		Gid:     int(st.Gid),
		ModTime: time.Unix(st.Mtim.Unix()),
	}
	xattrs, err := lw.xattrs(d, name, p)
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
		// O_NOFOLLOW: a symlink swapped in since the lstat is refused.
		sub, err := d.OpenDir(name)
		if err != nil {
			return fmt.Errorf("layer entry %s: %w", p, err)
		}
		defer sub.Close()
		hdr.Typeflag, hdr.Name = tar.TypeDir, p+"/"
		opaque, err := d.GetXattr(name, opaqueXattr)
		if err := lw.write(hdr, nil); err != nil {
			return err
		}
		if err == nil && string(opaque) == "y" {
			if err := lw.write(&tar.Header{Name: p + "/" + whiteoutOpaque, Typeflag: tar.TypeReg, ModTime: hdr.ModTime}, nil); err != nil {
				return err
			}
		}
		return lw.children(sub, p)
	case unix.S_IFLNK:
		target, err := d.Readlink(name)
		if err != nil {
			return fmt.Errorf("layer entry %s: %w", p, err)
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		return lw.write(hdr, nil)
	case unix.S_IFIFO:
		hdr.Typeflag = tar.TypeFifo
		return lw.write(hdr, nil)
	case unix.S_IFREG:
		// O_NONBLOCK: a FIFO swapped in since the lstat does not hang
		// the open; it is refused below.
		f, err := d.Open(name, unix.O_RDONLY|unix.O_NONBLOCK)
		if err != nil {
			return fmt.Errorf("layer entry %s: %w", p, err)
		}
		defer f.Close()
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			return fmt.Errorf("layer entry %s: %w", p, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return fmt.Errorf("layer entry %s: changed from a file while it was read (mode %#o)", p, st.Mode)
		}
		if st.Nlink > 1 {
			key := [2]uint64{uint64(st.Dev), st.Ino}
			if first, ok := lw.links[key]; ok {
				hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
				return lw.write(hdr, nil)
			}
			lw.links[key] = p
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
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

// xattrs returns the xattrs of the entry name of d that go into the
// layer, refusing the overlayfs ones that the upper directory cannot stand
// for alone.
func (lw *layerWriter) xattrs(d *dirfd.Dir, name, p string) (map[string]string, error) {
	names, err := d.ListXattrs(name)
	if err != nil {
		return nil, fmt.Errorf("layer entry %s: %w", p, err)
	}
	var out map[string]string
	for _, x := range names {
		switch {
		case x == redirectXattr, x == metacopyXattr:
			return nil, errdefs.Errorf(errdefs.NotSupported, "layer entry %s: overlayfs %s (a redirect_dir or metacopy mount) cannot be committed as a layer", p, x)
		case x == "security.capability", strings.HasPrefix(x, "user."):
			v, err := d.GetXattr(name, x)
			if err != nil {
				return nil, fmt.Errorf("layer entry %s: %w", p, err)
			}
			if out == nil {
				out = map[string]string{}
			}
			out[x] = string(v)
		}
	}
	return out, nil
}
