package daytona

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/berth-sh/berth/providers/internal/allowlist"
	"github.com/berth-sh/berth/providers/internal/rest"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// SnapshotPrefix marks a Spec.Image that names a Daytona snapshot rather
// than an image to build.
const SnapshotPrefix = "snapshot:"

// ImageLabel is the label that carries the image a sandbox was built from:
// Daytona's listing shows neither its build nor an image name.
const ImageLabel = "berth-image"

// WorkDirVar is the sandbox variable that carries Spec.WorkDir.
const WorkDirVar = "BERTH_WORKDIR"

// teardownTimeout bounds the cleanup of a create that failed half way.
const teardownTimeout = 2 * time.Minute

// Create makes a sandbox and waits until it has started. A create that
// fails after the API accepted it deletes what it made.
func (p *Provider) Create(ctx context.Context, spec driver.Spec) (driver.Sandbox, error) {
	req, diskGB, err := p.createRequest(spec)
	if err != nil {
		return nil, err
	}
	if p.disk != nil {
		if err := p.disk.acquire(ctx, diskGB); err != nil {
			return nil, err
		}
	}
	var sb sandboxDTO
	err = p.c.do(ctx, rest.Call{Method: http.MethodPost, URL: p.c.api("/sandbox"), JSON: req, NoRetry: true}, &sb)
	if err != nil {
		if ambiguous(err) {
			// The API may have made it before the answer was lost: find it
			// by the name we chose and delete it, or it runs unowned.
			p.deleteLost(ctx, req.Name)
		}
		if p.disk != nil {
			p.disk.release(diskGB)
		}
		return nil, err
	}
	return p.adopt(ctx, sb.ID, diskGB)
}

// adopt takes a sandbox the API has just made (created or forked): it binds
// its disk share, waits for it to start and returns a handle, or deletes
// it when it does not start.
func (p *Provider) adopt(ctx context.Context, id string, diskGB int) (driver.Sandbox, error) {
	if p.disk != nil {
		p.disk.bind(id, diskGB)
	}
	started, err := p.waitStarted(ctx, id, false)
	if err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
		defer cancel()
		if derr := p.Delete(dctx, id); derr != nil && !errors.Is(derr, errdefs.ErrNotFound) {
			err = errors.Join(err, fmt.Errorf("deleting the sandbox that did not start: %w", derr))
		}
		return nil, err
	}
	p.opts.Logger.Debug("daytona sandbox started", "id", started.ID)
	return p.newHandle(started), nil
}

// createRequest maps a Spec onto POST /sandbox, and returns the disk GB the
// sandbox will hold.
func (p *Provider) createRequest(spec driver.Spec) (createRequest, int, error) {
	req := createRequest{
		Name:               "berth-" + randomHex(6),
		User:               spec.User,
		Labels:             spec.Labels,
		Target:             p.opts.Target,
		TTLMinutes:         ceilMinutes(spec.TTL),
		AutoStopInterval:   0, // the TTL is the deadline; idleness is not
		AutoDeleteInterval: p.opts.autoDeleteMinutes(),
	}
	switch {
	case spec.Build != nil:
		return req, 0, errdefs.Errorf(errdefs.NotSupported, "daytona: building from a context directory is not supported; give an image or %s<name>", SnapshotPrefix)
	case strings.HasPrefix(spec.Image, SnapshotPrefix):
		req.Snapshot = strings.TrimPrefix(spec.Image, SnapshotPrefix)
		if req.Snapshot == "" {
			return req, 0, errdefs.Errorf(errdefs.InvalidArgument, "daytona: image %q names no snapshot", spec.Image)
		}
	default:
		// The reference becomes a Dockerfile line: refuse anything that
		// could add a line of its own.
		if spec.Image == "" || strings.IndexFunc(spec.Image, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
			return req, 0, errdefs.Errorf(errdefs.InvalidArgument, "daytona: image reference %q is empty or holds spaces or control characters", spec.Image)
		}
		req.BuildInfo = &buildInfo{DockerfileContent: "FROM " + spec.Image}
		// A listed sandbox shows no build, only its labels: the image
		// travels as one (info takes it back out).
		req.Labels = maps.Clone(spec.Labels)
		if req.Labels == nil {
			req.Labels = map[string]string{}
		}
		req.Labels[ImageLabel] = spec.Image
	}
	if len(spec.Env) > 0 || spec.WorkDir != "" {
		req.Env = make(map[string]string, len(spec.Env)+1)
		for k, v := range spec.Env {
			req.Env[k] = v
		}
		if spec.WorkDir != "" {
			req.Env[WorkDirVar] = spec.WorkDir
		}
	}
	lim := p.opts.Limits
	r := spec.Resources
	if r.CPUs > 0 {
		req.CPU = int(math.Ceil(r.CPUs))
		if req.CPU > lim.CPU {
			return req, 0, errdefs.Errorf(errdefs.InvalidArgument, "daytona: %g CPUs asked (%d cores rounded up); the per-sandbox maximum is %d cores", r.CPUs, req.CPU, lim.CPU)
		}
	}
	if r.MemoryMB > 0 {
		req.Memory = ceilDiv(r.MemoryMB, 1024)
		if req.Memory > lim.MemoryGB {
			return req, 0, errdefs.Errorf(errdefs.InvalidArgument, "daytona: %d MB of memory asked (%d GB rounded up); the per-sandbox maximum is %d GB", r.MemoryMB, req.Memory, lim.MemoryGB)
		}
	}
	diskGB := p.opts.DefaultDiskGB
	if r.StorageMB > 0 {
		req.Disk = ceilDiv(r.StorageMB, 1024)
		if req.Disk > lim.DiskGB {
			return req, 0, errdefs.Errorf(errdefs.InvalidArgument, "daytona: %d MB of disk asked (%d GB rounded up); the per-sandbox maximum is %d GB", r.StorageMB, req.Disk, lim.DiskGB)
		}
		diskGB = req.Disk
	}
	switch spec.Network.Mode {
	case driver.NetworkNone, "":
		req.NetworkBlockAll = true
	case driver.NetworkPublic:
	case driver.NetworkAllowlist:
		cidrs, domains, err := allowlist.Split("daytona", spec.Network.Allow)
		if err != nil {
			return req, 0, err
		}
		req.NetworkAllowList = strings.Join(cidrs, ",")
		req.DomainAllowList = strings.Join(domains, ",")
	default:
		return req, 0, errdefs.Errorf(errdefs.NotSupported, "daytona: network mode %q", spec.Network.Mode)
	}
	return req, diskGB, nil
}

// waitStarted waits, up to the start timeout, for the sandbox to reach
// `started`. A build that failed reports the end of its build log. A
// sandbox that stops instead is an error, unless it was stopped when a
// start was just asked for (the state may not have moved yet).
func (p *Provider) waitStarted(ctx context.Context, id string, fromStopped bool) (*sandboxDTO, error) {
	wctx, cancel := context.WithTimeout(ctx, p.opts.StartTimeout)
	defer cancel()
	sb, err := p.waitState(wctx, id, func(s string) bool {
		return s == stateStarted || failed(s) || gone(s) || (s == stateStopped && !fromStopped)
	})
	switch {
	case err != nil && ctx.Err() == nil && wctx.Err() != nil:
		state := "unknown"
		if sb != nil {
			state = sb.State
		}
		return nil, errdefs.Errorf(errdefs.DeadlineExceeded, "daytona: sandbox %s did not start within %v (state %s)", id, p.opts.StartTimeout, state)
	case err != nil:
		return nil, err
	case sb.State == stateBuildFailed:
		return nil, p.failure(ctx, errdefs.InvalidArgument, sb, "the image build failed")
	case sb.State == stateError:
		return nil, p.failure(ctx, errdefs.Unavailable, sb, "the sandbox failed to start")
	case sb.State != stateStarted:
		return nil, errdefs.Errorf(errdefs.Unavailable, "daytona: sandbox %s was %s while starting", id, sb.State)
	}
	return sb, nil
}

func (p *Provider) failure(ctx context.Context, c errdefs.Class, sb *sandboxDTO, what string) error {
	msg := fmt.Sprintf("daytona: sandbox %s: %s (state %s)", sb.ID, what, sb.State)
	if sb.ErrorReason != "" {
		msg += ": " + p.c.redact(sb.ErrorReason)
	}
	if tail := p.buildLogTail(ctx, sb.ID); tail != "" {
		msg += "\nbuild log (last lines):\n" + tail
	}
	return &errdefs.Error{Class: c, Err: errors.New(msg)}
}

// ambiguous reports whether a failed create may have made a sandbox anyway:
// the request may have reached the API when there is no 4xx answer.
func ambiguous(err error) bool {
	st := rest.StatusOf(err)
	return st == 0 || st >= 500
}

// deleteLost deletes the sandbox a lost create answer may have made.
func (p *Provider) deleteLost(ctx context.Context, name string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	err := p.deleteByID(dctx, name)
	p.opts.Logger.Debug("daytona cleanup after an ambiguous create", "name", name, "error", err)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
