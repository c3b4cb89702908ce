package local

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/providers/local/container"
	"github.com/berth-sh/berth/providers/local/image"
	"github.com/berth-sh/berth/providers/local/imagebuild"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Images of Specs with a Build are built by package imagebuild in a
// sandbox of this provider; this file is its Host.

// buildSandboxes counts the build sandboxes this process has started, so
// that tests can tell a cache hit from a build.
var buildSandboxes atomic.Int64

// builder builds on this provider; it pulls base images under policy pull.
func (p *Provider) builder(pull *driver.PullPolicy) *imagebuild.Builder {
	return &imagebuild.Builder{Host: buildHost{p, pull}, Store: p.store, LockDir: filepath.Join(p.state, "builds"), Log: p.log}
}

// BuildImage builds spec.Build (a cache hit when its image is stored,
// which starts no sandbox) and returns the built image's reference; log
// gets the steps and what they print.
func (p *Provider) BuildImage(ctx context.Context, spec driver.Spec, log io.Writer) (string, error) {
	if spec.Build == nil {
		return "", errdefs.Errorf(errdefs.InvalidArgument, "the spec has no build")
	}
	b := p.builder(spec.Pull)
	b.Output = log
	img, err := b.Build(ctx, spec)
	if err != nil {
		return "", err
	}
	return img.Ref, nil
}

// specImage returns the reference a Spec's sandboxes run: its Image, or
// the image its Build makes.
func (p *Provider) specImage(ctx context.Context, spec driver.Spec) (string, error) {
	if spec.Build == nil {
		return spec.Image, nil
	}
	img, err := p.builder(spec.Pull).Build(ctx, spec)
	if err != nil {
		return "", err
	}
	return img.Ref, nil
}

type buildHost struct {
	p    *Provider
	pull *driver.PullPolicy // of the build's Spec
}

func (h buildHost) Image(ctx context.Context, ref string) (image.Image, error) {
	return h.p.ensureImage(ctx, ref, h.pull)
}

// Start creates the build's sandbox as any other (from the pool when one
// is ready) and keeps its container handle for Rootfs, KillStrays and Stop.
func (h buildHost) Start(ctx context.Context, spec driver.Spec) (imagebuild.Sandbox, error) {
	p := h.p
	if p.rt.IsGVisor() {
		return nil, errdefs.Errorf(errdefs.NotSupported, "building images under runsc is not supported: the builder writes into the sandbox's root from the host and ends what a RUN left through the host's cgroup, neither of which gVisor's kernel sees; build the image with the default runtime (runc) first, then run it under runsc")
	}
	sb, err := p.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	buildSandboxes.Add(1)
	sh := sb.(*sandboxHandle)
	p.mu.Lock()
	ct := p.cts[sh.id]
	p.mu.Unlock()
	b := &buildSandbox{p: p, h: sh, ct: ct}
	if ct == nil {
		b.Close(ctx)
		return nil, fmt.Errorf("build sandbox %s: no container handle", sh.id)
	}
	p.log.Debug("build sandbox started", "id", sh.id)
	return b, nil
}

// buildSandbox is a sandbox of this provider running a build.
type buildSandbox struct {
	p  *Provider
	h  *sandboxHandle
	ct *container.Container
}

func (b *buildSandbox) Exec(ctx context.Context, cmd driver.Command) (driver.Process, error) {
	return b.h.Exec(ctx, cmd)
}

func (b *buildSandbox) Rootfs() string { return b.ct.Rootfs() }

func (b *buildSandbox) KillStrays(ctx context.Context) error { return b.ct.KillAllButInit(ctx) }

// Stop ends every process of the sandbox, so that its upper directory is
// still, and returns that directory. The overlay stays mounted until Close.
func (b *buildSandbox) Stop(ctx context.Context) (string, error) {
	if err := b.ct.Kill(ctx, unix.SIGKILL); err != nil {
		return "", err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := b.ct.Wait(wctx); err != nil {
		return "", err
	}
	return b.ct.UpperDir(), nil
}

func (b *buildSandbox) Close(ctx context.Context) {
	b.h.Close()
	if err := b.p.Delete(context.WithoutCancel(ctx), b.h.id); err != nil {
		b.p.log.Warn("deleting a build sandbox failed; berth sandboxes reap retries", "id", b.h.id, "error", err)
	}
}
