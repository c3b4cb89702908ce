package busyroot

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Copy copies the directories, regular files and symlinks of the tree src
// into dst, which exists, keeping permission bits: what the fakes' forks
// and file system snapshots carry over. Device nodes and the like are
// left out; Lay makes them. A regular file in dst is replaced, never
// written through (Lay's applets are hard links).
func Copy(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := info.Mode()
		switch {
		case d.IsDir():
			if err := os.MkdirAll(to, mode.Perm()); err != nil {
				return err
			}
			return os.Chmod(to, mode.Perm()|mode&(os.ModeSticky|os.ModeSetuid|os.ModeSetgid))
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Remove(to); err != nil && !os.IsNotExist(err) {
				return err
			}
			return os.Symlink(target, to)
		case mode.IsRegular():
			return replaceFile(p, to, mode.Perm())
		}
		return nil
	})
}

func replaceFile(from, to string, perm fs.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.Remove(to); err != nil && !os.IsNotExist(err) {
		return err
	}
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(to, perm) // the umask took bits OpenFile asked for
}
