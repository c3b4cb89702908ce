package results

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Read limits. Everything under a jobs directory may come from a sandbox
// (agent/ and verifier/ are downloaded from it), so no read is unbounded.
const (
	// MaxResultBytes bounds a result.json or config.json.
	MaxResultBytes = 4 << 20
	// MaxTextBytes bounds a log or output file shown on a page.
	MaxTextBytes = 256 << 10
	// MaxRawBytes bounds a file served whole.
	MaxRawBytes = 16 << 20
	// MaxListEntries bounds a directory listing.
	MaxListEntries = 1000
)

// Refusals of the confined reader, matched with errors.Is.
var (
	ErrSymlink    = errdefs.Errorf(errdefs.InvalidArgument, "symbolic link, not followed")
	ErrNotRegular = errdefs.Errorf(errdefs.InvalidArgument, "not a regular file")
	ErrBadPath    = errdefs.Errorf(errdefs.InvalidArgument, "path refused")
)

// tree is a directory that reads stay inside: no "..", no absolute paths,
// no symbolic link followed at any component (os.Root already refuses links
// out of the tree; links inside it are refused too, so what a page shows is
// what the name says), and only regular files are opened (a FIFO would
// block a read forever).
type tree struct {
	root *os.Root
	dir  string // for messages
	// fd is an O_PATH descriptor of dir for openat2, which resolves a
	// whole path beneath it with no link in one call: a job page opens
	// thousands of result.json files. -1 where openat2 is not available;
	// the os.Root walk does the same checks in more calls.
	fd int
}

func openTree(dir string) (*tree, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, errdefs.Classify(errdefs.NotFound, err)
	}
	t := &tree{root: r, dir: dir, fd: -1}
	if fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		t.fd = fd
	}
	return t, nil
}

func (t *tree) Close() error {
	if t.fd >= 0 {
		unix.Close(t.fd)
		t.fd = -1
	}
	return t.root.Close()
}

// open opens a regular file by its slash-separated relative name, never
// through a symbolic link, never outside the tree, without blocking on a
// FIFO. The caller closes it.
func (t *tree) open(name string) (*os.File, fs.FileInfo, error) {
	if !fs.ValidPath(name) || name == "." || strings.ContainsAny(name, "\\\x00") {
		return nil, nil, fmt.Errorf("%q: %w", name, ErrBadPath)
	}
	var f *os.File
	if t.fd >= 0 {
		fd, err := unix.Openat2(t.fd, name, &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		switch {
		case err == nil:
			f = os.NewFile(uintptr(fd), name)
		case errors.Is(err, unix.ELOOP):
			return nil, nil, fmt.Errorf("%s: %w", name, ErrSymlink)
		case errors.Is(err, unix.EXDEV):
			return nil, nil, fmt.Errorf("%s: %w", name, ErrBadPath)
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
			t.fd = -1 // a kernel or seccomp profile without openat2
		default:
			return nil, nil, classify(&fs.PathError{Op: "open", Path: name, Err: err})
		}
	}
	if f == nil {
		var err error
		if f, err = t.openWalk(name); err != nil {
			return nil, nil, err
		}
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, classify(err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", name, ErrNotRegular)
	}
	return f, fi, nil
}

// openWalk is open without openat2: every component checked with Lstat,
// then the open compared with the Lstat (a swap in between is refused).
func (t *tree) openWalk(name string) (*os.File, error) {
	if err := t.checkPath(name); err != nil {
		return nil, err
	}
	lfi, err := t.root.Lstat(name)
	if err != nil {
		return nil, classify(err)
	}
	if lfi.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("%s: %w", name, ErrSymlink)
	}
	if !lfi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w", name, ErrNotRegular)
	}
	f, err := t.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, classify(err)
	}
	if fi, err := f.Stat(); err != nil || !os.SameFile(lfi, fi) {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, ErrNotRegular)
	}
	return f, nil
}

// checkPath validates a slash-separated relative name and makes sure no
// directory on the way is a symbolic link.
func (t *tree) checkPath(name string) error {
	if !fs.ValidPath(name) || name == "." || strings.ContainsAny(name, "\\\x00") {
		return fmt.Errorf("%q: %w", name, ErrBadPath)
	}
	parts := strings.Split(name, "/")
	for i := 1; i < len(parts); i++ {
		fi, err := t.root.Lstat(path.Join(parts[:i]...))
		if err != nil {
			return classify(err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s: %w", path.Join(parts[:i]...), ErrSymlink)
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s: %w", path.Join(parts[:i]...), ErrBadPath)
		}
	}
	return nil
}

func classify(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errdefs.Classify(errdefs.NotFound, err)
	case errors.Is(err, ErrSymlink), errors.Is(err, ErrNotRegular), errors.Is(err, ErrBadPath):
		return err
	}
	return errdefs.Classify(errdefs.InvalidArgument, err)
}

// Text is a file read with a bound.
type Text struct {
	Name      string // relative to its trial or job directory
	Data      []byte
	Size      int64 // the file's full size
	Truncated bool  // Data holds only the first part
}

// String is the data as text.
func (t *Text) String() string {
	if t == nil {
		return ""
	}
	return string(t.Data)
}

// readFile reads at most limit bytes of a regular file.
func (t *tree) readFile(name string, limit int64) (*Text, error) {
	f, fi, err := t.open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readText(f, fi, name, limit)
}

func readText(f *os.File, fi fs.FileInfo, name string, limit int64) (*Text, error) {
	data, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, classify(err)
	}
	return &Text{Name: name, Data: data, Size: fi.Size(), Truncated: fi.Size() > int64(len(data))}, nil
}

// Entry is one name in a listed directory.
type Entry struct {
	Name string // relative to the trial directory
	Size int64
	Kind string // "file", "dir", "symlink -> target", "fifo", ...
	File bool   // a regular file, which can be shown
}

// list returns up to MaxListEntries names under dir, depth-first, sorted,
// and whether more were left out.
func (t *tree) list(dir string, depth int) ([]Entry, bool) {
	var out []Entry
	more := false
	var walk func(d string, depth int)
	walk = func(d string, depth int) {
		if err := t.checkPath(d); err != nil {
			return
		}
		if fi, err := t.root.Lstat(d); err != nil || !fi.IsDir() {
			return
		}
		f, err := t.root.Open(d)
		if err != nil {
			return
		}
		ents, err := f.ReadDir(MaxListEntries + 1)
		f.Close()
		if err != nil && !errors.Is(err, io.EOF) {
			return
		}
		sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
		for _, e := range ents {
			if len(out) >= MaxListEntries {
				more = true
				return
			}
			name := d + "/" + e.Name()
			en := Entry{Name: name, Kind: kindOf(e.Type())}
			if fi, err := e.Info(); err == nil {
				en.Size = fi.Size()
			}
			switch {
			case e.Type()&fs.ModeSymlink != 0:
				if target, err := t.root.Readlink(name); err == nil {
					en.Kind = "symlink -> " + target
				}
			case e.Type().IsRegular():
				en.File = true
			}
			out = append(out, en)
			if e.IsDir() && depth > 0 {
				walk(name, depth-1)
			}
		}
	}
	walk(dir, depth)
	return out, more
}

func kindOf(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "other"
}

// isDir reports whether name is a directory (not a link to one).
func (t *tree) isDir(name string) bool {
	if t.checkPath(name) != nil {
		return false
	}
	fi, err := t.root.Lstat(name)
	return err == nil && fi.IsDir()
}

// childDirs lists the directories directly in dir (symlinks skipped),
// sorted, at most limit.
func (t *tree) childDirs(dir string, limit int) ([]string, error) {
	if dir != "." {
		if err := t.checkPath(dir); err != nil {
			return nil, err
		}
	}
	f, err := t.root.Open(dir)
	if err != nil {
		return nil, classify(err)
	}
	defer f.Close()
	ents, err := f.ReadDir(limit)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, classify(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && e.Type()&fs.ModeSymlink == 0 {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}
