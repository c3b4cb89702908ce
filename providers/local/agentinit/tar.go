package agentinit

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"

	"github.com/berth-sh/berth/sandbox/hosttar"
	"github.com/berth-sh/berth/sandbox/types"
)

// ExtractTar unpacks the tar stream r into the absolute directory dir,
// creating it; hosttar keeps every entry under dir. It runs inside the
// sandbox as the calling user.
func ExtractTar(ctx context.Context, dir string, r io.Reader) error {
	if !path.IsAbs(dir) {
		return types.Errorf(types.InvalidArgument, "directory %q is not absolute", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("tar-x: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("tar-x: %w", err)
	}
	defer root.Close()
	if err := hosttar.Extract(ctx, root, r); err != nil {
		return err
	}
	// Drain what follows the archive's end, so the sender never blocks.
	_, _ = io.Copy(io.Discard, r)
	return nil
}

// WriteTar writes the tree at the absolute path p to w as a tar stream;
// entry names are relative to p and symlinks are stored, not followed.
func WriteTar(ctx context.Context, p string, w io.Writer) error {
	if !path.IsAbs(p) {
		return types.Errorf(types.InvalidArgument, "path %q is not absolute", p)
	}
	root, err := os.OpenRoot("/")
	if err != nil {
		return fmt.Errorf("tar-c: %w", err)
	}
	defer root.Close()
	name := path.Clean(p)
	if name == "/" {
		name = "."
	}
	return hosttar.Write(ctx, w, root, name)
}
