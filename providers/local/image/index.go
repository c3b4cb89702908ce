package image

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

const (
	indexFile   = "index.json"
	indexLock   = "index.lock" // held while the index is read, changed and written
	collectLock = "layers.lock"
	// Pulls and imports hold collectLock shared while they unpack and
	// record layers; layer collection takes it exclusive and skips its
	// work when it cannot, so that it never deletes a layer that an
	// unfinished pull is about to record.
	indexVersion = 1
	maxIndexSize = 64 << 20
)

// index is the file that maps references to image records.
type index struct {
	Version int              `json:"version"`
	Images  map[string]Image `json:"images"`
}

// lookup finds r: by its canonical name, or, for a digest reference, by
// the repository and manifest digest of a tagged record.
func (idx *index) lookup(r name.Reference) (Image, bool) {
	if rec, ok := idx.Images[r.Name()]; ok {
		return rec, true
	}
	d, ok := r.(name.Digest)
	if !ok {
		return Image{}, false
	}
	for _, rec := range idx.Images {
		if rec.Digest != d.DigestStr() {
			continue
		}
		if rr, err := name.ParseReference(rec.Ref); err == nil && rr.Context().Name() == d.Context().Name() {
			return rec, true
		}
	}
	return Image{}, false
}

func (s *Store) readIndex() (*index, error) {
	idx := &index{Version: indexVersion, Images: map[string]Image{}}
	b, err := os.ReadFile(filepath.Join(s.imagesDir, indexFile))
	if errors.Is(err, fs.ErrNotExist) {
		return idx, nil
	}
	if err != nil {
		return nil, fmt.Errorf("image index: %w", err)
	}
	if len(b) > maxIndexSize {
		return nil, fmt.Errorf("image index: %d bytes is more than an index can be", len(b))
	}
	if err := json.Unmarshal(b, idx); err != nil {
		return nil, fmt.Errorf("image index %s is damaged: %w", filepath.Join(s.imagesDir, indexFile), err)
	}
	if idx.Version != indexVersion {
		return nil, errdefs.Errorf(errdefs.NotSupported, "image index version %d; this berth reads version %d", idx.Version, indexVersion)
	}
	if idx.Images == nil {
		idx.Images = map[string]Image{}
	}
	return idx, nil
}

// updateIndex applies fn to the index under the index lock and writes it
// back atomically (temp file, fsync, rename) unless fn fails.
func (s *Store) updateIndex(fn func(*index) error) error {
	unlock, err := lockFile(filepath.Join(s.imagesDir, indexLock), unix.LOCK_EX)
	if err != nil {
		return err
	}
	defer unlock()
	idx, err := s.readIndex()
	if err != nil {
		return err
	}
	if err := fn(idx); err != nil {
		return err
	}
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(s.imagesDir, indexFile), b)
}

func writeAtomic(path string, b []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("image index: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(b); err != nil {
		return fmt.Errorf("image index: %w", err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("image index: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("image index: %w", err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("image index: %w", err)
	}
	if d, derr := os.Open(dir); derr == nil {
		d.Sync() // the rename survives a crash; failure here loses nothing we can fix
		d.Close()
	}
	return nil
}

// holdLayers takes the collect lock shared: no layer collection while a
// pull, import or commit checks the layers it uses and writes the record
// that keeps them.
func (s *Store) holdLayers() (unlock func(), err error) {
	return lockFile(filepath.Join(s.imagesDir, collectLock), unix.LOCK_SH)
}

// lockFile takes a flock on path. Locks belong to the open file, so two
// goroutines of one process exclude each other as two processes do.
// With unix.LOCK_NB it returns unix.EWOULDBLOCK when the lock is held.
func lockFile(path string, how int) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("image store lock: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, err
		}
		return nil, fmt.Errorf("image store lock: %w", err)
	}
	return func() { f.Close() }, nil
}

// layerPath is the directory of the layer with diff ID d. d comes from an
// image config, which is untrusted: only a well-formed sha256 is a name.
func (s *Store) layerPath(d string) (string, error) {
	hex, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(hex) != 64 || strings.Trim(hex, "0123456789abcdef") != "" {
		return "", errdefs.Errorf(errdefs.InvalidArgument, "layer diff ID %q is not a sha256 digest", d)
	}
	return filepath.Join(s.layersDir, hex), nil
}

// Temporary directories in layersDir are named .tmp-<pid>-..., so that one
// left by a process that died can be told from one still being written.
const tempPrefix = ".tmp-"

func tempPattern() string { return tempPrefix + strconv.Itoa(os.Getpid()) + "-*" }

func (s *Store) removeStaleTemps() {
	ents, err := os.ReadDir(s.layersDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), tempPrefix)
		if !ok {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 {
			continue
		}
		if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
			os.RemoveAll(filepath.Join(s.layersDir, e.Name()))
		}
	}
}

// collect deletes layer directories that no stored image uses. It does
// nothing while a pull or import is in progress in any process; the next
// Remove collects what this one left.
func (s *Store) collect() error {
	unlock, err := lockFile(filepath.Join(s.imagesDir, collectLock), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unlock()
	idx, err := s.readIndex()
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, rec := range idx.Images {
		for _, d := range rec.DiffIDs {
			keep[strings.TrimPrefix(d, "sha256:")] = true
		}
	}
	ents, err := os.ReadDir(s.layersDir)
	if err != nil {
		return fmt.Errorf("collect layers: %w", err)
	}
	var errs []error
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") || keep[e.Name()] {
			continue
		}
		// Rename first so that a half-deleted layer never looks complete.
		tmp, err := os.MkdirTemp(s.layersDir, tempPattern())
		if err != nil {
			return fmt.Errorf("collect layers: %w", err)
		}
		gone := filepath.Join(tmp, "layer")
		if err := os.Rename(filepath.Join(s.layersDir, e.Name()), gone); err != nil {
			errs = append(errs, err)
		}
		if err := os.RemoveAll(tmp); err != nil {
			errs = append(errs, err)
		}
	}
	s.removeStaleTemps()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("collect layers: %w", err)
	}
	return nil
}
