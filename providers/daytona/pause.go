package daytona

import (
	"context"
	"errors"
	"net/http"

	"github.com/berth-sh/berth/providers/internal/rest"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

var (
	_ driver.Pauser = (*Sandbox)(nil)
	_ driver.Forker = (*Sandbox)(nil)
)

// Pause pauses the sandbox with its memory kept. Daytona pauses only
// sandboxes of a VM class (linux-vm, windows: made from a snapshot of that
// class); it answers 422 for a container, which is NotSupported here.
func (s *Sandbox) Pause(ctx context.Context) error {
	if err := s.p.c.do(ctx, rest.Call{Method: http.MethodPost, URL: s.p.sandboxURL(s.id, "pause")}, nil); err != nil {
		return vmOnly(err, "paused")
	}
	sb, err := s.p.waitState(ctx, s.id, func(st string) bool { return st != statePausing && st != stateStarted })
	if err != nil {
		return err
	}
	if sb.State != statePaused {
		return errdefs.Errorf(errdefs.Unavailable, "daytona: sandbox %s is %s after a pause", s.id, sb.State)
	}
	return nil
}

// Resume starts a paused sandbox again and waits until it runs.
func (s *Sandbox) Resume(ctx context.Context) error {
	if err := s.p.c.do(ctx, rest.Call{Method: http.MethodPost, URL: s.p.sandboxURL(s.id, "start")}, nil); err != nil {
		return err
	}
	_, err := s.p.waitStarted(ctx, s.id, true)
	return err
}

// Fork makes a new sandbox from this one as it runs, and waits until the
// fork has started. Like pausing, forking is for VM-class sandboxes. The
// fork takes its share of the disk cap (Options.DiskQuotaGB) like any new
// sandbox, and is deleted again if it does not start.
func (s *Sandbox) Fork(ctx context.Context) (driver.Sandbox, error) {
	p := s.p
	src, err := p.get(ctx, s.id)
	if err != nil {
		return nil, err
	}
	disk := max(src.Disk, p.opts.DefaultDiskGB)
	if p.disk != nil {
		if err := p.disk.acquire(ctx, disk); err != nil {
			return nil, err
		}
	}
	var child sandboxDTO
	err = p.c.do(ctx, rest.Call{Method: http.MethodPost, URL: p.sandboxURL(s.id, "fork"), JSON: map[string]string{}, NoRetry: true}, &child)
	if err != nil {
		if p.disk != nil {
			p.disk.release(disk)
		}
		return nil, vmOnly(err, "forked")
	}
	return p.adopt(ctx, child.ID, disk)
}

// vmOnly turns the API's 422 for a sandbox class that cannot do what was
// asked into NotSupported, the cause kept.
func vmOnly(err error, what string) error {
	var ae *rest.APIError
	if errors.As(err, &ae) && ae.Status == http.StatusUnprocessableEntity {
		// The answer, not its InvalidArgument class, is the cause.
		return errdefs.Errorf(errdefs.NotSupported, "daytona: only sandboxes of a VM class (linux-vm, windows) can be %s: %w", what, ae)
	}
	return err
}
