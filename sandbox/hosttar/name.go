package hosttar

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// CleanName checks a tar entry name and returns it cleaned, relative, with
// "/" separators and no trailing slash; the tree's own root is ".". Absolute
// names, names with a ".." element, NUL bytes and empty names are refused as
// InvalidArgument: a ".." that happens to clean away ("a/../b") is refused
// too, because an archive that says it is up to something.
func CleanName(name string) (string, error) {
	switch {
	case name == "":
		return "", errdefs.Errorf(errdefs.InvalidArgument, "tar entry has an empty name")
	case strings.ContainsRune(name, 0):
		return "", errdefs.Errorf(errdefs.InvalidArgument, "tar entry name %q contains a NUL byte", name)
	case path.IsAbs(name) || strings.HasPrefix(name, `\`):
		return "", errdefs.Errorf(errdefs.InvalidArgument, "tar entry %q has an absolute name", name)
	}
	for el := range strings.SplitSeq(name, "/") {
		if el == ".." {
			return "", errdefs.Errorf(errdefs.InvalidArgument, "tar entry %q has a \"..\" element", name)
		}
	}
	return path.Clean(name), nil
}

// CheckSymlink checks that a symlink at the cleaned entry name pointing at
// target resolves inside the tree: the target is relative and, taken from
// the link's directory, never climbs above the tree's root.
func CheckSymlink(name, target string) error {
	if target == "" || path.IsAbs(target) || strings.ContainsRune(target, 0) {
		return errdefs.Errorf(errdefs.InvalidArgument, "symlink %q -> %q: the target must be a relative path inside the tree", name, target)
	}
	if !Local(path.Join(path.Dir(name), target)) {
		return errdefs.Errorf(errdefs.InvalidArgument, "symlink %q -> %q points outside the tree", name, target)
	}
	return nil
}

// Local reports whether a cleaned slash path stays inside the tree.
func Local(p string) bool {
	return !path.IsAbs(p) && p != ".." && !strings.HasPrefix(p, "../")
}

// Ancestors returns the proper prefixes of a cleaned name, shortest first:
// "a/b/c" gives "a", "a/b".
func Ancestors(name string) []string {
	var out []string
	for i := 0; i < len(name); i++ {
		if name[i] == '/' {
			out = append(out, name[:i])
		}
	}
	return out
}

// ReadError classes an error from tar.Reader.Next: a malformed or truncated
// archive is InvalidArgument; a cancellation, or an error the stream's
// producer already classed, passes through; anything else is a failure of
// the stream itself, Unavailable.
func ReadError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errdefs.ClassOf(err) != errdefs.Unknown:
		return err
	case errors.Is(err, tar.ErrHeader), errors.Is(err, tar.ErrFieldTooLong),
		errors.Is(err, tar.ErrInsecurePath), errors.Is(err, io.ErrUnexpectedEOF):
		return errdefs.Classify(errdefs.InvalidArgument, fmt.Errorf("reading tar: %w", err))
	default:
		return errdefs.Classify(errdefs.Unavailable, fmt.Errorf("reading tar: %w", err))
	}
}
