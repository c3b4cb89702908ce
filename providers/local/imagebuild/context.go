package imagebuild

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/berth-sh/berth/providers/local/dockerfile"
	"github.com/berth-sh/berth/sandbox/errdefs"
	"github.com/berth-sh/berth/sandbox/hosttar"
)

// The build context is read through an os.Root on its directory, so no
// COPY or ADD source, however named and whatever symlinks it meets, is read
// from outside it; a symlink in a copied tree that points outside the
// context is refused rather than copied.

// ctxEntry is one file, directory or symlink of the build context.
type ctxEntry struct {
	rel  string // slash path in the context; "." is the context itself
	info fs.FileInfo
	link string // a symlink's target
}

// sources expands a COPY or ADD instruction's sources (all arguments but
// the last) into context paths: a wildcard in the last element matches the
// names of its directory, in order. As in Docker, a source is a path from
// the context's root: "/etc/x" and "../etc/x" are its etc/x.
func sources(root *os.Root, in dockerfile.Instruction) ([]string, error) {
	var out []string
	for _, src := range in.Args[:len(in.Args)-1] {
		rel := rootRel(strings.TrimPrefix(path.Clean("/"+src), "/"))
		dir, pattern := path.Split(rel)
		if strings.ContainsAny(dir, "*?[") {
			return nil, stepErr(in, errdefs.NotSupported, "source %q: wildcards are supported in the last path element only", src)
		}
		if !strings.ContainsAny(pattern, "*?[") {
			out = append(out, rel)
			continue
		}
		if _, err := path.Match(pattern, ""); err != nil {
			return nil, stepErr(in, errdefs.InvalidArgument, "source %q: %v", src, err)
		}
		d, err := root.Open(rootRel(path.Clean(dir)))
		if err != nil {
			return nil, stepErr(in, errdefs.InvalidArgument, "source %q: %v", src, err)
		}
		names, err := d.Readdirnames(-1)
		d.Close()
		if err != nil {
			return nil, stepErr(in, errdefs.InvalidArgument, "source %q: %v", src, err)
		}
		slices.Sort(names)
		n := len(out)
		for _, name := range names {
			if ok, _ := path.Match(pattern, name); ok {
				out = append(out, path.Join(dir, name))
			}
		}
		if len(out) == n {
			return nil, stepErr(in, errdefs.InvalidArgument, "source %q matches no file in the build context", src)
		}
	}
	return out, nil
}

func rootRel(p string) string {
	if p == "" || p == "/" {
		return "."
	}
	return p
}

// walkContext calls fn for rel and, when it is a directory, for everything
// under it, parents first, names in order. rel itself is followed if it is
// a symlink (inside the context); symlinks under it are reported as such
// and must stay inside the context. Devices, sockets and FIFOs are refused.
func walkContext(root *os.Root, rel string, fn func(ctxEntry) error) error {
	fi, err := root.Stat(rootRel(rel))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return errdefs.Errorf(errdefs.InvalidArgument, "%s: no such file in the build context", rel)
		}
		// os.Root refuses a symlink that leads out of the context.
		return errdefs.Errorf(errdefs.InvalidArgument, "%s is outside the build context or unreadable (%v)", rel, err)
	}
	return walkEntry(root, ctxEntry{rel: rel, info: fi}, fn)
}

func walkEntry(root *os.Root, e ctxEntry, fn func(ctxEntry) error) error {
	switch {
	case e.info.Mode()&fs.ModeSymlink != 0:
		if err := hosttar.CheckSymlink(e.rel, e.link); err != nil {
			return errdefs.Errorf(errdefs.InvalidArgument, "symlink %s -> %s points outside the build context", e.rel, e.link)
		}
		return fn(e)
	case e.info.Mode().IsRegular():
		return fn(e)
	case !e.info.IsDir():
		return errdefs.Errorf(errdefs.InvalidArgument, "%s is a %v; only files, directories and symlinks can be copied", e.rel, e.info.Mode().Type())
	}
	if err := fn(e); err != nil {
		return err
	}
	d, err := root.Open(rootRel(e.rel))
	if err != nil {
		return errdefs.Errorf(errdefs.InvalidArgument, "%s: %v", e.rel, err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("read %s: %w", e.rel, err)
	}
	slices.Sort(names)
	for _, n := range names {
		child := path.Join(e.rel, n)
		fi, err := root.Lstat(child)
		if err != nil {
			return fmt.Errorf("%s: %w", child, err)
		}
		c := ctxEntry{rel: child, info: fi}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if c.link, err = root.Readlink(child); err != nil {
				return fmt.Errorf("%s: %w", child, err)
			}
		}
		if err := walkEntry(root, c, fn); err != nil {
			return err
		}
	}
	return nil
}

// hashSource feeds everything of rel that a copy would use into h: each
// path, type, mode bits, size and content digest (or link target).
// Modification times are left out: a touched file with the same content
// is the same input.
func hashSource(h hash.Hash, root *os.Root, rel string) error {
	buf := make([]byte, 64<<10)
	return walkContext(root, rel, func(e ctxEntry) error {
		fmt.Fprintf(h, "%q %o %d", e.rel, e.info.Mode(), e.info.Size())
		switch {
		case e.info.Mode()&fs.ModeSymlink != 0:
			fmt.Fprintf(h, " -> %q", e.link)
		case e.info.Mode().IsRegular():
			f, err := root.Open(e.rel)
			if err != nil {
				return fmt.Errorf("%s: %w", e.rel, err)
			}
			fh := sha256.New()
			_, err = io.CopyBuffer(fh, f, buf)
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", e.rel, err)
			}
			fmt.Fprintf(h, " %x", fh.Sum(nil))
		}
		_, err := io.WriteString(h, "\n")
		return err
	})
}

// stepErr is an error of one Dockerfile instruction, naming its line.
func stepErr(in dockerfile.Instruction, c errdefs.Class, format string, args ...any) error {
	return errdefs.Errorf(c, "Dockerfile:%d: %s: %s", in.Line, in.Cmd, fmt.Sprintf(format, args...))
}
