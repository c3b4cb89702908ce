package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// layerSource is a layer to unpack.
type layerSource struct {
	// diffID is the digest the uncompressed stream must have; "" when it is
	// not known before reading (a plain rootfs tar).
	diffID string
	// open returns the uncompressed tar stream.
	open func() (io.ReadCloser, error)
}

// ensureLayer makes sure the layer is unpacked and returns its diff ID.
// Concurrent calls for one diff ID unpack it once in this process; across
// processes, the first rename wins and the others discard their copy.
func (s *Store) ensureLayer(ctx context.Context, src layerSource) (string, error) {
	if src.diffID == "" {
		return s.unpack(ctx, src)
	}
	dir, err := s.layerPath(src.diffID)
	if err != nil {
		return "", err
	}
	if isDir(dir) {
		return src.diffID, nil
	}
	return shared(ctx, &s.flight, "layer "+src.diffID, func() (string, error) {
		if isDir(dir) {
			return src.diffID, nil
		}
		return s.unpack(ctx, src)
	})
}

func isDir(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir()
}

// unpack unpacks src into a temporary directory, checks its digest and
// renames it into place. On any error the temporary directory is removed.
func (s *Store) unpack(ctx context.Context, src layerSource) (diffID string, err error) {
	s.unpacks.Add(1)
	tmp, err := os.MkdirTemp(s.layersDir, tempPattern())
	if err != nil {
		return "", fmt.Errorf("unpack layer: %w", err)
	}
	defer func() {
		if tmp != "" {
			os.RemoveAll(tmp)
		}
	}()
	rc, err := src.open()
	if err != nil {
		return "", &sourceError{fmt.Errorf("open layer %s: %w", src.diffID, err)}
	}
	res, err := unpackLayer(ctx, tmp, rc)
	if cerr := rc.Close(); err == nil && cerr != nil {
		// Verifying readers report a bad blob digest on close.
		err = &sourceError{cerr}
	}
	if err != nil {
		if src.diffID != "" {
			return "", fmt.Errorf("layer %s: %w", src.diffID, err)
		}
		return "", err
	}
	if src.diffID != "" && res.diffID != src.diffID {
		return "", errdefs.Errorf(errdefs.InvalidArgument, "layer %s: its content has digest %s", src.diffID, res.diffID)
	}
	// The layer root is the root of every rootfs stacked on it.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("unpack layer: %w", err)
	}
	final, err := s.layerPath(res.diffID)
	if err != nil {
		return "", err
	}
	err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, final, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// No RENAME_NOREPLACE here; rename still fails onto a non-empty
		// directory, and replacing an empty one is harmless.
		err = os.Rename(tmp, final)
	}
	switch {
	case err == nil:
		tmp = ""
	case (errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY)) && isDir(final):
		// Another process unpacked it first; ours is removed by the defer.
	default:
		return "", fmt.Errorf("unpack layer: %w", err)
	}
	return res.diffID, nil
}

// classifyLayerError classes a failure to unpack a layer that came from
// where: a failure reading the stream becomes sourceClass, with what named.
func classifyLayerError(err error, sourceClass errdefs.Class, what string) error {
	if err == nil || errdefs.ClassOf(err) != errdefs.Unknown ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var se *sourceError
	if errors.As(err, &se) {
		return errdefs.Errorf(sourceClass, "%s: %w", what, err)
	}
	return err
}
