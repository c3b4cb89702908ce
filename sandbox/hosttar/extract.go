package hosttar

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/dirfd"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Options bound and shape an extraction. The zero value has no limits and
// keeps no world-writable bit.
type Options struct {
	// MaxBytes bounds the regular files' bytes, all entries together, as
	// their headers declare them (a sparse file counts its full size), so
	// an entry over the limit is refused before any of it is written.
	// Zero is no limit.
	MaxBytes int64
	// MaxEntries bounds the number of entries; zero is no limit.
	MaxEntries int
	// WorldWritable keeps the o+w bit of entries. Only for trees extracted
	// into a sandbox (its own files, as the archive says); a tree that
	// lands on the host never gets it.
	WorldWritable bool
}

// LimitError is the error of an extraction stopped by Options.MaxBytes or
// MaxEntries. Its class is ResourceExhausted; the caller names the setting
// that moves the limit.
type LimitError struct {
	What  string // "bytes" or "entries"
	Max   int64
	Entry string // the entry that would have passed the limit
}

func (e *LimitError) Error() string {
	if e.What == "bytes" {
		return fmt.Sprintf("tar entry %q would take the extracted files over the %s limit", e.Entry, FormatBytes(e.Max))
	}
	return fmt.Sprintf("tar entry %q would take the archive over the %d entries limit", e.Entry, e.Max)
}

// Unwrap makes the class ResourceExhausted.
func (e *LimitError) Unwrap() error { return errdefs.ErrResourceExhausted }

// FormatBytes writes a byte count for people: "1 GiB", "512 MiB", "1500 bytes".
func FormatBytes(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// Extract unpacks a tar stream into root with the zero Options.
func Extract(ctx context.Context, root *os.Root, r io.Reader) error {
	_, err := ExtractWith(ctx, root, r, Options{})
	return err
}

// Stats count what an extraction wrote.
type Stats struct {
	Files int   // regular files written
	Bytes int64 // their bytes
}

// ExtractWith unpacks a tar stream into root. Directories and regular files
// are created with their permission bits only (no set-id or sticky bits,
// no owners, no o+w unless o.WorldWritable); symlinks whose targets stay
// inside the tree and hard links to regular files of the tree are made;
// device and FIFO entries are skipped because they mean nothing on the
// receiving side.
//
// Every operation goes through package dirfd with every symlink refused
// on the way, so no entry writes through a link, whatever an earlier entry
// or the tree already held. A symlink is checked when it is made, by
// resolving it through the links the tree holds at that moment, and all of
// them again at the end, when every link is there: a chain of links that
// are each harmless ("s -> .", "a -> s", then "x -> a/b/../..") but lead
// outside together is removed and refused.
//
// An unsafe entry stops the extraction with an InvalidArgument error, a
// limit with a *LimitError (ResourceExhausted); what was extracted before
// stays, and Stats counts it.
func ExtractWith(ctx context.Context, root *os.Root, r io.Reader, o Options) (Stats, error) {
	f, err := root.Open(".")
	if err != nil {
		return Stats{}, classifyFS(err)
	}
	dr, err := dirfd.FromFile(f, dirfd.Beneath)
	f.Close()
	if err != nil {
		return Stats{}, classifyFS(err)
	}
	defer dr.Close()
	x := &extractor{root: dr, o: o}
	err = x.run(ctx, r)
	return x.stats, err
}

type extractor struct {
	root    *dirfd.Root
	o       Options
	bytes   int64 // declared sizes so far, for MaxBytes
	entries int
	stats   Stats
	links   []string // symlinks made, for the final check
	dirs    []dirMode
}

type dirMode struct {
	name string
	mode uint32
}

func (x *extractor) run(ctx context.Context, r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return ReadError(err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if err := x.entry(tr, hdr); err != nil {
			return err
		}
	}
	if err := x.recheckLinks(); err != nil {
		return err
	}
	// Modes are applied last, deepest first, so that a read-only directory
	// does not stop its own children from being written.
	slices.Reverse(x.dirs)
	for _, d := range x.dirs {
		pd, base, err := x.root.Parent(d.name)
		if err != nil {
			return classifyFS(err)
		}
		err = pd.Chmod(base, d.mode)
		pd.Close()
		if err != nil {
			return classifyFS(err)
		}
	}
	return nil
}

// mode is what an entry's mode becomes on this side.
func (x *extractor) mode(hdr *tar.Header) uint32 {
	m := uint32(hdr.Mode) & 0o777
	if !x.o.WorldWritable {
		m &^= 0o002
	}
	return m
}

func (x *extractor) entry(tr *tar.Reader, hdr *tar.Header) error {
	name, err := CleanName(hdr.Name)
	if err != nil {
		return err
	}
	x.entries++
	if x.o.MaxEntries > 0 && x.entries > x.o.MaxEntries {
		return &LimitError{What: "entries", Max: int64(x.o.MaxEntries), Entry: hdr.Name}
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		d, err := x.root.MkdirAll(name, 0o755)
		if err != nil {
			return x.fsErr(name, err)
		}
		d.Close()
		if name != "." { // the destination itself keeps its own mode
			x.dirs = append(x.dirs, dirMode{name, x.mode(hdr)})
		}
		return nil
	case tar.TypeReg:
		if hdr.Size < 0 || x.o.MaxBytes > 0 && hdr.Size > x.o.MaxBytes-x.bytes {
			return &LimitError{What: "bytes", Max: x.o.MaxBytes, Entry: hdr.Name}
		}
		x.bytes += hdr.Size
		return x.file(name, tr, x.mode(hdr))
	case tar.TypeSymlink:
		return x.symlink(name, hdr.Linkname)
	case tar.TypeLink:
		return x.hardlink(name, hdr.Linkname)
	default:
		// Devices, FIFOs and vendor types carry nothing to keep.
		return nil
	}
}

// place opens the parent of name, making missing directories, and clears
// a non-directory at name so that the new entry replaces it rather than
// writing through it.
func (x *extractor) place(name string) (*dirfd.Dir, string, error) {
	if name == "." {
		return nil, "", errdefs.Errorf(errdefs.InvalidArgument, "tar entry %q would replace the tree's root", name)
	}
	d, err := x.root.MkdirAll(path.Dir(name), 0o755)
	if err != nil {
		return nil, "", x.fsErr(name, err)
	}
	base := path.Base(name)
	if err := d.Clear(base); err != nil {
		d.Close()
		if errors.Is(err, dirfd.ErrIsDir) {
			return nil, "", errdefs.Errorf(errdefs.AlreadyExists, "tar entry %q: a directory is in the way", name)
		}
		return nil, "", x.fsErr(name, err)
	}
	return d, base, nil
}

func (x *extractor) file(name string, r io.Reader, mode uint32) error {
	d, base, err := x.place(name)
	if err != nil {
		return err
	}
	defer d.Close()
	// O_EXCL: place removed whatever was there, so anything found now was
	// raced in and is not ours to follow.
	f, err := d.Create(base, 0o600)
	if err != nil {
		return x.fsErr(name, err)
	}
	n, err := io.Copy(f, r)
	x.stats.Bytes += n
	x.stats.Files++
	if err == nil {
		err = unix.Fchmod(int(f.Fd()), mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if c := errdefs.ClassOf(err); c != errdefs.Unknown {
			return err
		}
		// A write the errno table does not class (EIO) may pass.
		return errdefs.Classify(errdefs.Unavailable, errdefs.ClassifyErrno(fmt.Errorf("writing %q: %w", name, err)))
	}
	return nil
}

func (x *extractor) symlink(name, target string) error {
	if err := CheckSymlink(name, target); err != nil {
		return err
	}
	d, base, err := x.place(name)
	if err != nil {
		return err
	}
	err = d.Symlink(target, base)
	d.Close()
	if err != nil {
		return x.fsErr(name, err)
	}
	x.links = append(x.links, name)
	if why := x.escape(name); why != "" {
		x.removeLink(name)
		return errdefs.Errorf(errdefs.InvalidArgument, "symlink %q -> %q leads outside the tree through the links already extracted (%s)", name, target, why)
	}
	return nil
}

func (x *extractor) hardlink(name, linkname string) error {
	old, err := CleanName(linkname)
	if err != nil {
		return err
	}
	od, obase, err := x.root.Parent(old)
	if err != nil {
		return x.fsErr(old, err)
	}
	defer od.Close()
	st, err := od.Lstat(obase)
	if err != nil {
		return x.fsErr(old, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		// A hard link to a symlink is a copy of the link that resolves
		// from another directory: it could lead anywhere.
		return errdefs.Errorf(errdefs.InvalidArgument, "hard link %q -> %q: the target is not a regular file of the tree", name, linkname)
	}
	d, base, err := x.place(name)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Link(base, od, obase); err != nil {
		return x.fsErr(name, err)
	}
	return nil
}

// fsErr classes a dirfd error of entry name; a symlink in the way is the
// archive's doing.
func (x *extractor) fsErr(name string, err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
		return errdefs.Errorf(errdefs.InvalidArgument, "tar entry %q passes through a symlink (%v)", name, err)
	}
	return classifyFS(err)
}

func (x *extractor) removeLink(name string) {
	if d, base, err := x.root.Parent(name); err == nil {
		if st, err := d.Lstat(base); err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			_ = d.Unlink(base)
		}
		d.Close()
	}
}

// recheckLinks resolves every symlink made again, now that the tree is
// complete: a later link can change where an earlier one leads.
func (x *extractor) recheckLinks() error {
	var bad, names []string
	for _, l := range x.links {
		if why := x.escape(l); why != "" {
			bad = append(bad, fmt.Sprintf("%q (%s)", l, why))
			names = append(names, l)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	for _, l := range names {
		x.removeLink(l)
	}
	return errdefs.Errorf(errdefs.InvalidArgument, "symlinks that lead outside the tree together with the other links were removed: %v", bad)
}
