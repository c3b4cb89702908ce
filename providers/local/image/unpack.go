package image

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/dirfd"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Whiteout names from the OCI image spec, and their overlayfs forms.
const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."
	whiteoutOpaque = ".wh..wh..opq"
	opaqueXattr    = "trusted.overlay.opaque"
)

// sourceError marks a failure to read the layer stream itself (a truncated
// or corrupt archive, a network error), so that the caller can class it by
// where the stream came from.
type sourceError struct{ err error }

func (e *sourceError) Error() string { return e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

// unsafeEntry reports a layer entry that would write outside the layer or
// through a link; it is always InvalidArgument and names the entry.
func unsafeEntry(name, why string) error {
	return errdefs.Errorf(errdefs.InvalidArgument, "layer entry %q: %s", name, why)
}

// node is what the unpacker knows it has created at a path. The temporary
// directory starts empty and only the unpacker writes to it, so this map is
// the exact state of the tree, and checks against it cannot be raced.
type node struct {
	typ byte // tar.TypeDir, tar.TypeReg, tar.TypeSymlink, tar.TypeFifo, tar.TypeChar (whiteout)
	hdr *tar.Header
}

type unpacker struct {
	root  *dirfd.Root
	nodes map[string]*node
	dirs  []string // explicit directory entries, for modes and times at the end
	buf   []byte
	euid  int

	// The directory of the last entry, kept open: entries come grouped by
	// directory, and one openat per entry is much cheaper than resolving
	// every component of every path. Dropped whenever anything is removed,
	// since it could be the directory removed.
	atDir  string
	atRoot *dirfd.Dir
}

// at returns p's parent directory and p's base name; every call on the
// name acts on it without following it. The parent was checked by parents,
// so it is a real directory of this layer.
func (u *unpacker) at(p string) (*dirfd.Dir, string, error) {
	dir, base := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	if u.atRoot != nil && u.atDir == dir {
		return u.atRoot, base, nil
	}
	u.dropAt()
	d, err := u.root.OpenDir(rootRel(dir))
	if err != nil {
		return nil, "", err
	}
	u.atDir, u.atRoot = dir, d
	return d, base, nil
}

func (u *unpacker) dropAt() {
	if u.atRoot != nil {
		u.atRoot.Close()
		u.atRoot = nil
	}
}

// unpackResult is what unpacking a layer learned about it.
type unpackResult struct {
	diffID string // "sha256:<hex>" of the whole uncompressed stream
	size   int64  // bytes in the uncompressed stream
}

// unpackLayer unpacks the uncompressed tar stream r into dir, which must be
// empty, converting whiteouts to overlayfs form. It reads r to its end so
// that the digest covers the whole stream and a verifying reader below sees
// EOF. On error dir is left for the caller to remove.
func unpackLayer(ctx context.Context, dir string, r io.Reader) (unpackResult, error) {
	// Beneath: no symlink is followed on any path, whatever the layer
	// holds (parents already refuses paths through this layer's links).
	root, err := dirfd.Open(dir, dirfd.Beneath)
	if err != nil {
		return unpackResult{}, err
	}
	defer root.Close()
	u := &unpacker{
		root:  root,
		nodes: map[string]*node{},
		buf:   make([]byte, 1<<20),
		euid:  os.Geteuid(),
	}
	defer u.dropAt()
	h := sha256.New()
	cr := &countingReader{ctx: ctx, r: io.TeeReader(r, h)}
	tr := tar.NewReader(cr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var se *sourceError
			if !errors.As(err, &se) {
				err = &sourceError{err}
			}
			return unpackResult{}, sourceOrCtx(ctx, err)
		}
		if err := u.entry(tr, hdr); err != nil {
			return unpackResult{}, sourceOrCtx(ctx, err)
		}
	}
	// The tar trailer and any padding after it are part of the diff ID.
	if _, err := io.CopyBuffer(io.Discard, cr, u.buf); err != nil {
		return unpackResult{}, sourceOrCtx(ctx, err)
	}
	if err := u.finish(); err != nil {
		return unpackResult{}, err
	}
	return unpackResult{diffID: digestOf(h), size: cr.n}, nil
}

func digestOf(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

// sourceOrCtx reports cancellation as itself, whatever error it caused.
func sourceOrCtx(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return err
}

// countingReader counts bytes, stops on cancellation, and marks read errors
// as the source's.
type countingReader struct {
	ctx context.Context
	r   io.Reader
	n   int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF {
		err = &sourceError{err}
	}
	return n, err
}

// cleanName turns a tar entry name into a slash path relative to the layer
// root ("" for the root itself), refusing absolute names and "..".
func cleanName(name string) (string, error) {
	if strings.HasPrefix(name, "/") {
		return "", unsafeEntry(name, "absolute path")
	}
	var parts []string
	for _, p := range strings.Split(name, "/") {
		switch p {
		case "", ".":
		case "..":
			return "", unsafeEntry(name, `path contains ".."`)
		default:
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "/"), nil
}

func (u *unpacker) entry(tr *tar.Reader, hdr *tar.Header) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	p, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	if p == "" {
		return nil // the layer root: overlay takes the root's attributes from the upper dir
	}
	dir, base := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	if strings.HasPrefix(base, whiteoutPrefix) {
		return u.whiteout(hdr.Name, dir, base)
	}
	if err := u.parents(hdr.Name, dir); err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeChar, tar.TypeBlock:
		return nil // devices come from the runtime, never from an image
	case tar.TypeDir, tar.TypeReg, tar.TypeSymlink, tar.TypeLink, tar.TypeFifo:
	default:
		return unsafeEntry(hdr.Name, fmt.Sprintf("unsupported entry type %q", hdr.Typeflag))
	}
	if old := u.nodes[p]; old != nil {
		if old.typ == tar.TypeDir && hdr.Typeflag == tar.TypeDir {
			old.hdr = hdr // a later header for the same directory: its metadata wins
			u.dirs = append(u.dirs, p)
			return u.owner(p, hdr)
		}
		if err := u.remove(p); err != nil {
			return err
		}
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		r, base, err := u.at(p)
		if err != nil {
			return fsError(hdr.Name, err)
		}
		if err := r.Mkdir(base, 0o700); err != nil {
			return fsError(hdr.Name, err)
		}
		u.nodes[p] = &node{typ: tar.TypeDir, hdr: hdr}
		u.dirs = append(u.dirs, p)
		return u.owner(p, hdr)
	case tar.TypeReg: // the reader turns old-style TypeRegA into TypeReg or TypeDir
		return u.file(tr, p, hdr)
	case tar.TypeSymlink:
		r, base, err := u.at(p)
		if err != nil {
			return fsError(hdr.Name, err)
		}
		if err := r.Symlink(hdr.Linkname, base); err != nil {
			return fsError(hdr.Name, err)
		}
		u.nodes[p] = &node{typ: tar.TypeSymlink, hdr: hdr}
		return u.owner(p, hdr)
	case tar.TypeLink:
		return u.hardlink(p, hdr)
	default: // tar.TypeFifo
		if err := u.mknod(hdr.Name, p, unix.S_IFIFO|uint32(hdr.Mode&0o777), 0); err != nil {
			return err
		}
		u.nodes[p] = &node{typ: tar.TypeFifo, hdr: hdr}
		return u.owner(p, hdr)
	}
}

// parents makes sure every component of dir is a directory of this layer,
// creating missing ones, and refuses a path through a symlink or a file.
func (u *unpacker) parents(name, dir string) error {
	if dir == "" {
		return nil
	}
	parts := strings.Split(dir, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		n := u.nodes[p]
		if n == nil {
			d, base, err := u.at(p)
			if err != nil {
				return fsError(name, err)
			}
			if err := d.Mkdir(base, 0o755); err != nil {
				return fsError(name, err)
			}
			if err := d.Chmod(base, 0o755); err != nil { // whatever the umask
				return fsError(name, err)
			}
			u.nodes[p] = &node{typ: tar.TypeDir}
			continue
		}
		if n.typ != tar.TypeDir {
			what := "a file"
			if n.typ == tar.TypeSymlink {
				what = "a symlink"
			}
			return unsafeEntry(name, fmt.Sprintf("parent %q is %s in this layer", p, what))
		}
	}
	return nil
}

// remove deletes p and forgets everything under it.
func (u *unpacker) remove(p string) error {
	d, base, err := u.at(p)
	if err == nil {
		err = d.RemoveAll(base)
	}
	u.dropAt()
	if err != nil {
		return fsError(p, err)
	}
	for k := range u.nodes {
		if k == p || strings.HasPrefix(k, p+"/") {
			delete(u.nodes, k)
		}
	}
	return nil
}

func (u *unpacker) whiteout(name, dir, base string) error {
	if err := u.parents(name, dir); err != nil {
		return err
	}
	if base == whiteoutOpaque {
		d, err := u.root.Open(rootRel(dir), unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return fsError(name, err)
		}
		defer d.Close()
		if err := unix.Fsetxattr(int(d.Fd()), opaqueXattr, []byte("y"), 0); err != nil {
			return fsError(name, fmt.Errorf("set %s: %w", opaqueXattr, err))
		}
		return nil
	}
	if strings.HasPrefix(base, whiteoutMeta) {
		return nil // other AUFS metadata (.wh..wh.plnk and the like) means nothing to overlayfs
	}
	target := strings.TrimPrefix(base, whiteoutPrefix)
	if target == "" || target == "." || target == ".." {
		return unsafeEntry(name, "whiteout of no name")
	}
	p := path.Join(dir, target)
	if u.nodes[p] != nil {
		if err := u.remove(p); err != nil {
			return err
		}
	}
	if err := u.mknod(name, p, unix.S_IFCHR, 0); err != nil {
		return err
	}
	u.nodes[p] = &node{typ: tar.TypeChar}
	return nil
}

// mknod makes a node at p. The parent was checked by parents, so it is a
// real directory.
func (u *unpacker) mknod(name, p string, mode uint32, dev int) error {
	d, base, err := u.at(p)
	if err != nil {
		return fsError(name, err)
	}
	if err := d.Mknod(base, mode, dev); err != nil {
		return fsError(name, err)
	}
	return nil
}

func rootRel(p string) string {
	if p == "" {
		return "."
	}
	return p
}

func (u *unpacker) file(tr *tar.Reader, p string, hdr *tar.Header) (err error) {
	r, base, err := u.at(p)
	if err != nil {
		return fsError(hdr.Name, err)
	}
	f, err := r.Create(base, 0o600)
	if err != nil {
		return fsError(hdr.Name, err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fsError(hdr.Name, cerr)
		}
	}()
	u.nodes[p] = &node{typ: tar.TypeReg, hdr: hdr}
	if _, err := io.CopyBuffer(f, tr, u.buf); err != nil {
		var se *sourceError
		if errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) {
			return &sourceError{fmt.Errorf("entry %q: %w", hdr.Name, err)}
		}
		return fsError(hdr.Name, err)
	}
	// Chown before chmod and xattrs: chown clears setuid bits and capabilities.
	if err := u.chown(func(uid, gid int) error { return f.Chown(uid, gid) }, hdr); err != nil {
		return fsError(hdr.Name, err)
	}
	if err := unix.Fchmod(int(f.Fd()), unixMode(hdr)); err != nil {
		return fsError(hdr.Name, err)
	}
	for _, x := range keptXattrs(hdr) {
		if err := unix.Fsetxattr(int(f.Fd()), x.name, []byte(x.value), 0); err != nil {
			return fsError(hdr.Name, fmt.Errorf("set xattr %s: %w", x.name, err))
		}
	}
	// Last, on the open file: any write after it would move the mtime.
	if err := unix.Futimes(int(f.Fd()), fileTimes(hdr)); err != nil {
		return fsError(hdr.Name, err)
	}
	return nil
}

func fileTimes(hdr *tar.Header) []unix.Timeval {
	atime := hdr.AccessTime
	if atime.IsZero() {
		atime = hdr.ModTime
	}
	return []unix.Timeval{unix.NsecToTimeval(atime.UnixNano()), unix.NsecToTimeval(hdr.ModTime.UnixNano())}
}

func (u *unpacker) hardlink(p string, hdr *tar.Header) error {
	target, err := cleanName(hdr.Linkname)
	if err != nil {
		return unsafeEntry(hdr.Name, fmt.Sprintf("hardlink target %q is outside the layer", hdr.Linkname))
	}
	n := u.nodes[target]
	if target == "" || n == nil {
		return unsafeEntry(hdr.Name, fmt.Sprintf("hardlink target %q is not in this layer", hdr.Linkname))
	}
	if n.typ != tar.TypeReg && n.typ != tar.TypeSymlink {
		return unsafeEntry(hdr.Name, fmt.Sprintf("hardlink target %q is not a file", hdr.Linkname))
	}
	od, obase, err := u.root.Parent(target)
	if err != nil {
		return fsError(hdr.Name, err)
	}
	defer od.Close()
	d, base, err := u.at(p)
	if err != nil {
		return fsError(hdr.Name, err)
	}
	if err := d.Link(base, od, obase); err != nil {
		return fsError(hdr.Name, err)
	}
	u.nodes[p] = &node{typ: n.typ, hdr: n.hdr}
	return nil
}

// owner sets the owner of p without following a symlink.
func (u *unpacker) owner(p string, hdr *tar.Header) error {
	r, base, err := u.at(p)
	if err != nil {
		return fsError(hdr.Name, err)
	}
	if err := u.chown(func(uid, gid int) error { return r.Chown(base, uid, gid) }, hdr); err != nil {
		return fsError(hdr.Name, err)
	}
	return nil
}

// chown applies the header's owner. Without root it cannot, and the files
// stay the caller's: that is only useful for tests of the parser.
func (u *unpacker) chown(fn func(uid, gid int) error, hdr *tar.Header) error {
	err := fn(hdr.Uid, hdr.Gid)
	if err != nil && u.euid != 0 && errors.Is(err, syscall.EPERM) {
		return nil
	}
	return err
}

// finish applies directory modes and times, deepest first so that setting
// a child's time does not disturb its parent's.
func (u *unpacker) finish() error {
	sort.Sort(sort.Reverse(sort.StringSlice(u.dirs)))
	done := map[string]bool{}
	for _, p := range u.dirs {
		n := u.nodes[p]
		// A directory replaced later by another entry is not touched
		// (and nothing here follows a name: a link there keeps its target).
		if done[p] || n == nil || n.typ != tar.TypeDir || n.hdr == nil {
			continue
		}
		done[p] = true
		d, base, err := u.root.Parent(p)
		if err != nil {
			return fsError(n.hdr.Name, err)
		}
		err = d.Chmod(base, unixMode(n.hdr))
		if err == nil {
			err = d.Chtimes(base, n.hdr.AccessTime, n.hdr.ModTime)
		}
		d.Close()
		if err != nil {
			return fsError(n.hdr.Name, err)
		}
	}
	return nil
}

// unixMode keeps permission, setuid, setgid and sticky bits: an image's
// set-id binaries stay set-id inside its sandboxes (where no_new_privs
// makes them inert), and the overlay's host side is mounted nosuid.
func unixMode(hdr *tar.Header) uint32 { return uint32(hdr.Mode) & 0o7777 }

type xattr struct{ name, value string }

// keptXattrs returns the file capabilities and user xattrs of a header.
// Others are dropped: trusted.overlay.* from a layer would steer overlayfs.
func keptXattrs(hdr *tar.Header) []xattr {
	var out []xattr
	for k, v := range hdr.PAXRecords {
		name, ok := strings.CutPrefix(k, "SCHILY.xattr.")
		if !ok {
			continue
		}
		if name == "security.capability" || strings.HasPrefix(name, "user.") {
			out = append(out, xattr{name, v})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// fsError wraps a failure of the local file system, classed by its errno
// in the one table (errdefs.ClassifyErrno): a full disk is a Permanent
// ResourceExhausted, an unusable name in the layer InvalidArgument.
func fsError(name string, err error) error {
	return errdefs.ClassifyErrno(fmt.Errorf("layer entry %q: %w", name, err))
}
