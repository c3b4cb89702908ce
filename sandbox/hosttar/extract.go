package hosttar

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"syscall"

	"github.com/berth-sh/berth/sandbox/types"
)

// Extract unpacks a tar stream into root. Directories and regular files are
// created (permission bits only: no set-id bits, no owners), symlinks whose
// targets stay inside the tree and hard links to earlier entries are made;
// device and FIFO entries are skipped because they mean nothing on the
// receiving side. An entry that is unsafe stops the extraction with an
// InvalidArgument error; what was extracted before it stays.
func Extract(ctx context.Context, root *os.Root, r io.Reader) error {
	tr := tar.NewReader(r)
	type dirMode struct {
		name string
		mode fs.FileMode
	}
	var dirs []dirMode
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
		name, err := CleanName(hdr.Name)
		if err != nil {
			return err
		}
		if err := checkAncestors(root, name); err != nil {
			return err
		}
		mode := fs.FileMode(hdr.Mode) & fs.ModePerm
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return classifyFS(err)
			}
			// Modes are applied last, deepest first, so that a read-only
			// directory does not stop its own children from being written.
			dirs = append(dirs, dirMode{name, mode})
		case tar.TypeReg:
			if err := writeFile(root, name, tr, mode); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := CheckSymlink(name, hdr.Linkname); err != nil {
				return err
			}
			if err := prepare(root, name); err != nil {
				return err
			}
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return classifyFS(err)
			}
		case tar.TypeLink:
			old, err := CleanName(hdr.Linkname)
			if err != nil {
				return err
			}
			if err := checkAncestors(root, old); err != nil {
				return err
			}
			if err := prepare(root, name); err != nil {
				return err
			}
			if err := root.Link(old, name); err != nil {
				return classifyFS(err)
			}
		default:
			// Devices, FIFOs and vendor types carry nothing to keep.
		}
	}
	slices.Reverse(dirs)
	for _, d := range dirs {
		if err := root.Chmod(d.name, d.mode); err != nil {
			return classifyFS(err)
		}
	}
	return nil
}

// checkAncestors refuses a name that passes through a symlink: a link planted
// by an earlier entry must not redirect a later one, even inside the tree.
func checkAncestors(root *os.Root, name string) error {
	for _, a := range Ancestors(name) {
		fi, err := root.Lstat(a)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return classifyFS(err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return types.Errorf(types.InvalidArgument, "tar entry %q passes through the symlink %q", name, a)
		}
	}
	return nil
}

// prepare makes the parent of name and removes a non-directory already at
// name, as tar does, so that the new entry replaces it rather than writing
// through it.
func prepare(root *os.Root, name string) error {
	if name == "." {
		return types.Errorf(types.InvalidArgument, "tar entry %q would replace the tree's root", name)
	}
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return classifyFS(err)
		}
	}
	fi, err := root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return classifyFS(err)
	case fi.IsDir():
		return types.Errorf(types.AlreadyExists, "tar entry %q: a directory is in the way", name)
	}
	return classifyFS(root.Remove(name))
}

func writeFile(root *os.Root, name string, r io.Reader, mode fs.FileMode) error {
	if err := prepare(root, name); err != nil {
		return err
	}
	// O_EXCL: prepare removed whatever was there, so anything found now was
	// raced in and is not ours to follow.
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return classifyFS(err)
	}
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return types.Classify(types.Unavailable, fmt.Errorf("writing %q: %w", name, err))
	}
	return nil
}

// classifyFS maps host file system errors onto the error classes.
func classifyFS(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return types.Classify(types.NotFound, err)
	case errors.Is(err, fs.ErrExist):
		return types.Classify(types.AlreadyExists, err)
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return types.Classify(types.ResourceExhausted, err)
	default:
		// Escapes from the root, permission errors and type mismatches are
		// all the caller's archive or path being wrong.
		return types.Classify(types.InvalidArgument, err)
	}
}
