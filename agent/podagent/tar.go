package podagent

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/berth-sh/berth/sandbox/hosttar"
)

// Untar unpacks the tar stream r into dir, creating it, and keeps every
// write under dir (hosttar). It runs inside the sandbox as the calling
// user: the provider's TreeUploader execs it, so a tree arrives in one
// call on any image, tar or not.
func Untar(ctx context.Context, dir string, r io.Reader) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("untar: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("untar: %w", err)
	}
	defer root.Close()
	return hosttar.Extract(ctx, root, r)
}

// Tar writes the tree at path to w as a tar stream whose names are relative
// to path (TreeDownloader's contract), symlinks stored, not followed.
func Tar(ctx context.Context, path string, w io.Writer) error {
	root, err := os.OpenRoot("/")
	if err != nil {
		return fmt.Errorf("tar: %w", err)
	}
	defer root.Close()
	return hosttar.Write(ctx, w, root, path)
}
