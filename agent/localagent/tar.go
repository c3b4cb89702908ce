package localagent

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"

	"github.com/berth-sh/berth/sandbox/errdefs"
	"github.com/berth-sh/berth/sandbox/hosttar"
)

// extractTar unpacks the tar stream r into the absolute directory dir,
// creating it; hosttar keeps every entry under dir (no "..", no absolute
// names, no writes through symlinks, no link chain leading out). The
// agent's "/" is the sandbox's, so dir is the sandbox's path, and the
// files are the sandbox's own: their o+w bits stay (set-id bits never do).
func extractTar(ctx context.Context, dir string, r io.Reader) error {
	if !path.IsAbs(dir) {
		return errdefs.Errorf(errdefs.InvalidArgument, "directory %q is not absolute", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return classifyFS(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return classifyFS(err)
	}
	defer root.Close()
	if _, err := hosttar.ExtractWith(ctx, root, r, hosttar.Options{WorldWritable: true}); err != nil {
		return err
	}
	// Drain what follows the archive's end, so the sender never blocks.
	_, _ = io.Copy(io.Discard, r)
	return nil
}

// writeTar writes the tree at the absolute path p to w as a tar stream;
// entry names are relative to p and symlinks are stored, not followed. A
// missing p is NotFound before anything is written to w.
func writeTar(ctx context.Context, p string, w io.Writer) error {
	if !path.IsAbs(p) {
		return errdefs.Errorf(errdefs.InvalidArgument, "path %q is not absolute", p)
	}
	root, err := os.OpenRoot("/")
	if err != nil {
		return classifyFS(err)
	}
	defer root.Close()
	name := path.Clean(p)
	if name == "/" {
		name = "."
	}
	return hosttar.Write(ctx, w, root, name)
}

// classifyFS classes an error of the sandbox's file system that hosttar
// did not class, as envd classes the same errors of its file calls.
func classifyFS(err error) error {
	switch {
	case err == nil || errdefs.ClassOf(err) != errdefs.Unknown:
		return err
	case errors.Is(err, fs.ErrNotExist):
		return errdefs.Classify(errdefs.NotFound, err)
	case errors.Is(err, fs.ErrExist):
		return errdefs.Classify(errdefs.AlreadyExists, err)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return errdefs.Classify(errdefs.Unauthenticated, err)
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return errdefs.Classify(errdefs.ResourceExhausted, err)
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ELOOP),
		errors.Is(err, syscall.ENAMETOOLONG):
		return errdefs.Classify(errdefs.InvalidArgument, err)
	}
	return err
}
