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
	"strings"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Write writes the tree at name in root to w as a tar stream and closes the
// archive (not w). Entry names are relative to name: a directory's children
// are "a", "sub/", "sub/b"; a single file is its base name. Symlinks are
// stored as links, never followed; sockets and devices are left out. A missing
// name is NotFound.
func Write(ctx context.Context, w io.Writer, root *os.Root, name string) error {
	name = path.Clean(strings.TrimPrefix(name, "/"))
	if name == "" || !Local(name) {
		return errdefs.Errorf(errdefs.InvalidArgument, "path %q is not inside the tree", name)
	}
	fi, err := root.Lstat(name)
	if err != nil {
		return classifyFS(err)
	}
	tw := tar.NewWriter(w)
	if !fi.IsDir() {
		if err := writeEntry(tw, root, name, path.Base(name), fi); err != nil {
			return err
		}
		return tw.Close()
	}
	err = fs.WalkDir(root.FS(), name, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return classifyFS(err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == name {
			return nil
		}
		rel := strings.TrimPrefix(p, name+"/")
		if name == "." {
			rel = p
		}
		info, err := d.Info()
		if err != nil {
			return classifyFS(err)
		}
		return writeEntry(tw, root, p, rel, info)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func writeEntry(tw *tar.Writer, root *os.Root, p, rel string, fi fs.FileInfo) error {
	hdr := &tar.Header{
		Name:    rel,
		Mode:    int64(fi.Mode().Perm()),
		ModTime: fi.ModTime(),
	}
	switch {
	case fi.IsDir():
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
	case fi.Mode().IsRegular():
		hdr.Typeflag = tar.TypeReg
		hdr.Size = fi.Size()
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := root.Readlink(p)
		if err != nil {
			return classifyFS(err)
		}
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = target
	default:
		return nil
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("tar header for %q: %w", rel, err)
	}
	if hdr.Typeflag != tar.TypeReg {
		return nil
	}
	f, err := root.Open(p)
	if err != nil {
		return classifyFS(err)
	}
	defer f.Close()
	// The header promised Size bytes; a file that shrank since cannot keep
	// that promise, and one that grew is cut at the size it had.
	if _, err := io.CopyN(tw, f, hdr.Size); err != nil {
		if errors.Is(err, io.EOF) {
			return errdefs.Errorf(errdefs.Unavailable, "%q shrank while it was being archived", rel)
		}
		return err
	}
	return nil
}
