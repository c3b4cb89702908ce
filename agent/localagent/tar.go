package localagent

import (
	"context"
	"io"
	"os"
	"path"

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
		return errdefs.ClassifyErrno(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return errdefs.ClassifyErrno(err)
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
		return errdefs.ClassifyErrno(err)
	}
	defer root.Close()
	name := path.Clean(p)
	if name == "/" {
		name = "."
	}
	return hosttar.Write(ctx, w, root, name)
}
