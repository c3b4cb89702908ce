package fakeprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/berth-sh/berth/internal/atomicfile"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// meta is what a sandbox's meta.json holds: enough for a fresh provider
// value to Connect, List and Exec.
type meta struct {
	ID        string            `json:"id"`
	Image     string            `json:"image,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	WorkDir   string            `json:"work_dir,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	ExpiresAt time.Time         `json:"expires_at"`
}

// metaMu serialises read-modify-write of meta files in this process.
var metaMu sync.Mutex

func readMeta(dir string) (meta, error) {
	var m meta
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if errors.Is(err, os.ErrNotExist) {
		return m, errdefs.Errorf(errdefs.NotFound, "sandbox %s does not exist", filepath.Base(dir))
	}
	if err != nil {
		return m, errdefs.Classify(errdefs.Unavailable, err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, errdefs.Classify(errdefs.Unavailable, fmt.Errorf("sandbox %s: bad meta.json: %w", filepath.Base(dir), err))
	}
	return m, nil
}

// liveMeta reads a sandbox's meta and destroys the sandbox if its TTL has
// passed, so that an expired sandbox is NotFound even when no timer of this
// process was watching it.
func liveMeta(dir string) (meta, error) {
	m, err := readMeta(dir)
	if err != nil {
		return m, err
	}
	if !time.Now().Before(m.ExpiresAt) {
		_ = destroy(context.Background(), dir)
		return m, errdefs.Errorf(errdefs.NotFound, "sandbox %s expired at %s", m.ID, m.ExpiresAt.Format(time.RFC3339))
	}
	return m, nil
}

// writeMeta replaces meta.json atomically, so readers never see half of it.
func writeMeta(dir string, m meta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	err = atomicfile.Write(filepath.Join(dir, "meta.json"), b, 0o600)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrNotExist): // the sandbox's directory is gone
		return errdefs.Classify(errdefs.NotFound, err)
	}
	return errdefs.Classify(errdefs.Unavailable, err)
}
