package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// state is what Load needs to find and delete a container from another
// process; it is written to Config.Dir when Create succeeds.
type state struct {
	ID        string            `json:"id"`
	Binary    string            `json:"binary"`
	Pid       int               `json:"pid"`
	StartTime uint64            `json:"start_time"`
	Cgroups   map[string]string `json:"cgroups"`
}

func (ct *Container) save() error {
	b, err := json.Marshal(state{ID: ct.id, Binary: ct.bin, Pid: ct.pid, StartTime: ct.start, Cgroups: ct.cgroups})
	if err != nil {
		return err
	}
	tmp := ct.path(stateFile + ".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, ct.path(stateFile))
}

// Load returns a handle to the container created in dir by Create, from
// any process. A container whose init has exited still loads, so that
// Delete can remove what is left; a dir without a container is NotFound.
// The runtime's Root must be the one the container was created with.
func (r Runtime) Load(ctx context.Context, dir string) (*Container, error) {
	if err := checkRoot(); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, errdefs.Errorf(errdefs.NotFound, "no container in %s", dir)
		}
		return nil, fmt.Errorf("load container: %w", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("load container from %s: %w", dir, err)
	}
	if !idPattern().MatchString(st.ID) || st.Pid <= 0 {
		return nil, fmt.Errorf("load container from %s: bad state", dir)
	}
	bin := st.Binary
	if bin == "" {
		if bin, err = r.binary(); err != nil {
			return nil, err
		}
	}
	ct := &Container{rt: r, bin: bin, id: st.ID, dir: dir, pid: st.Pid, start: st.StartTime, cgroups: st.Cgroups}
	if _, err := os.Lstat(filepath.Join(dir, diskImage)); err == nil {
		ct.disk = true
	}
	p, err := openProc(st.Pid, st.StartTime)
	switch {
	case err == nil:
		ct.proc = p
	case errdefs.ClassOf(err) == errdefs.NotFound:
		// Exited (e.g. the agent reached its deadline): Delete cleans up.
	default:
		return nil, err
	}
	return ct, nil
}
