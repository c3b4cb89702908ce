package local

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/atomicfile"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Names inside a sandbox directory.
const (
	metaFile     = "meta.json"
	socketFile   = "agent.sock"
	containerDir = "container"
)

// meta is a sandbox's record on disk. Token is a secret: the file is root's
// alone and nothing prints it.
type meta struct {
	ID      string            `json:"id"`
	Image   string            `json:"image"`    // canonical reference
	ImageID string            `json:"image_id"` // config digest
	Labels  map[string]string `json:"labels,omitempty"`
	Created time.Time         `json:"created"`
	Expires time.Time         `json:"expires"`
	Token   string            `json:"token"`
	Socket  string            `json:"socket"`
	WorkDir string            `json:"work_dir,omitempty"`
	Network string            `json:"network"`
}

func (m *meta) info() driver.Info {
	return driver.Info{
		ID: m.ID, Image: m.Image, Labels: m.Labels, State: "running",
		CreatedAt: m.Created, ExpiresAt: m.Expires,
	}
}

// idPattern is what newID makes; anything else is no sandbox of ours, and
// never becomes a path.
var idPattern = regexp.MustCompile(`^sb-[0-9a-f]{16}$`)

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "sb-" + hex.EncodeToString(b)
}

func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (p *Provider) dir(id string) string { return filepath.Join(p.sandboxes, id) }

// readMeta reads a sandbox's record; a missing one is NotFound.
func (p *Provider) readMeta(id string) (*meta, error) {
	if !idPattern.MatchString(id) {
		return nil, errdefs.Errorf(errdefs.NotFound, "no sandbox %q (local ids look like sb-0123456789abcdef)", id)
	}
	b, err := os.ReadFile(filepath.Join(p.dir(id), metaFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, errdefs.Errorf(errdefs.NotFound, "no sandbox %s", id)
		}
		return nil, fmt.Errorf("read sandbox %s: %w", id, err)
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil || m.ID != id {
		return nil, fmt.Errorf("sandbox %s: corrupt %s", id, metaFile)
	}
	return &m, nil
}

// writeMeta replaces the record atomically, so readers see all or nothing.
func (p *Provider) writeMeta(m *meta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	err = atomicfile.Write(filepath.Join(p.dir(m.ID), metaFile), b, 0o600)
	if errors.Is(err, os.ErrNotExist) {
		return errdefs.Errorf(errdefs.NotFound, "sandbox %s is gone", m.ID)
	}
	return err
}

// dirLock is an flock on a sandbox directory: its creator holds it until
// the sandbox is complete, and a deleter holds it while tearing down.
type dirLock struct{ f *os.File }

// lockDir locks the sandbox directory; wait false fails at once with
// errBusy when someone else holds it. A directory that is gone, or was
// removed while we waited, is NotFound.
func lockDir(dir string, wait bool) (*dirLock, error) {
	f, err := os.Open(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, errdefs.Errorf(errdefs.NotFound, "no sandbox %s", filepath.Base(dir))
		}
		return nil, err
	}
	how := unix.LOCK_EX
	if !wait {
		how |= unix.LOCK_NB
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
			return nil, errBusy
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	// The holder before us may have removed the directory.
	var st, now unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || unix.Stat(dir, &now) != nil || st.Ino != now.Ino || st.Dev != now.Dev {
		f.Close()
		return nil, errdefs.Errorf(errdefs.NotFound, "no sandbox %s", filepath.Base(dir))
	}
	return &dirLock{f: f}, nil
}

var errBusy = errors.New("sandbox directory is locked by another operation")

func (l *dirLock) unlock() {
	if l != nil && l.f != nil {
		l.f.Close() // closing the last fd releases the flock
		l.f = nil
	}
}
