package local

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth/agent/localagent"
	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/providers/local/container"
	"github.com/berth-sh/berth/providers/local/image"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// agentStartTimeout bounds the wait for a new agent's first answer; it
// answers in milliseconds unless something is wrong.
const agentStartTimeout = 15 * time.Second

// Create makes a sandbox: image, checks, directory, socket, container,
// agent. Everything that can be refused is refused before anything is made;
// a failure after that removes what was made.
func (p *Provider) Create(ctx context.Context, spec driver.Spec) (driver.Sandbox, error) {
	if spec.Build != nil {
		ref, err := p.specImage(ctx, spec) // a cache hit after PrepareImage
		if err != nil {
			return nil, err
		}
		spec.Image, spec.Build = ref, nil
	}
	run, err := p.agent(ctx)
	if err != nil {
		return nil, err
	}
	lim, err := p.limits(spec.Resources)
	if err != nil {
		return nil, err
	}
	disk, err := diskBytes(spec.Resources)
	if err != nil {
		return nil, err
	}
	img, err := p.ensureImage(ctx, spec.Image, spec.Pull)
	if err != nil {
		return nil, err
	}
	userSpec := spec.User
	if userSpec == "" {
		userSpec = img.Config.User
	}
	who, err := resolveUser(userSpec, img.Layers)
	if err != nil {
		return nil, err
	}
	workDir := spec.WorkDir
	if workDir == "" {
		workDir = img.Config.WorkingDir
	}
	if workDir != "" {
		if !path.IsAbs(workDir) {
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "working directory %q is not absolute", workDir)
		}
		workDir = path.Clean(workDir)
	}
	network := container.NetworkNone
	if spec.Network.Mode == driver.NetworkPublic {
		network = container.NetworkPublic
	}
	if h := p.fromPool(ctx, poolRequest{spec, img, who, workDir, poolKey{network, disk}, lim}); h != nil {
		return h, nil
	}

	id, dir, lock, err := p.newDir()
	if err != nil {
		return nil, err
	}
	defer lock.unlock()
	now := time.Now()
	m := &meta{
		ID: id, Image: img.Ref, ImageID: img.ID, Labels: spec.Labels,
		Created: now.UTC(), Expires: now.Add(spec.TTL).UTC(),
		Token: newToken(), Socket: p.socketPath(dir),
		WorkDir: workDir, Network: string(spec.Network.Mode),
	}
	ct, err := p.start(ctx, m, run, img, who, lim, poolKey{network, disk}, spec.Env)
	if err != nil {
		// start removed the container; the directory is ours alone.
		removeSandboxDir(dir)
		return nil, err
	}
	h, err := p.handle(m)
	if err == nil {
		err = p.waitAgent(ctx, h, ct)
	}
	if err == nil {
		err = p.writeMeta(m)
	}
	if err != nil {
		if h != nil {
			h.Close()
		}
		derr := ct.Delete(context.WithoutCancel(ctx))
		if derr == nil {
			derr = removeSandboxDir(dir)
		}
		return nil, errors.Join(err, derr)
	}
	p.mu.Lock()
	p.cts[id] = ct
	p.mu.Unlock()
	return h, nil
}

// newDir makes a new sandbox's directory under a fresh ID and locks it
// (see lockDir): until meta.json is written, List, Connect and Reap leave
// it alone.
func (p *Provider) newDir() (id, dir string, lock *dirLock, err error) {
	id = newID()
	dir = p.dir(id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", "", nil, fmt.Errorf("create sandbox dir: %w", err)
	}
	if lock, err = lockDir(dir, true); err != nil {
		os.RemoveAll(dir)
		return "", "", nil, err
	}
	return id, dir, lock, nil
}

// start runs the container with the agent as its init.
func (p *Provider) start(ctx context.Context, m *meta, run launch, img image.Image, who identity, lim container.Limits, k poolKey, env map[string]string) (*container.Container, error) {
	if p.rt.IsGVisor() {
		ct, err := p.startGVisor(ctx, m, run, img, who, lim, k, env)
		if err != nil {
			return nil, fmt.Errorf("start sandbox %s: %w", m.ID, err)
		}
		return ct, nil
	}
	ln, err := container.ListenUnix(m.Socket)
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	// The image's and the Spec's environment go to the commands through
	// the config pipe, never into the init's own environment: LD_PRELOAD
	// or GODEBUG there would load code into, or steer, the agent itself.
	cfg, err := localagent.WriteConfig(localagent.Config{
		Token: m.Token, Deadline: m.Expires, User: who.user, Dir: m.WorkDir,
		Env: envMap(img.Config.Env, env),
	})
	if err != nil {
		return nil, err
	}
	defer cfg.Close()
	ct, err := p.rt.Create(ctx, container.Config{
		ID:         m.ID,
		LowerDirs:  img.Layers,
		Dir:        filepath.Join(p.dir(m.ID), containerDir),
		Init:       append(slices.Clone(run.argv), "agent"),
		InitBinary: run.initBinary,
		Mounts:     run.mounts,
		ExtraFiles: []*os.File{ln, cfg}, // fds 3 and 4: localagent.ListenFD, ConfigFD
		Cwd:        m.WorkDir,
		User:       who.agent,
		Limits:     lim,
		Network:    k.network,
		DiskBytes:  k.disk,
	})
	if err != nil {
		return nil, fmt.Errorf("start sandbox %s: %w", m.ID, err)
	}
	return ct, nil
}

// waitAgent waits for the agent's first answer. The socket listened before
// the container started, so the request queues until the agent accepts it;
// an agent that dies first closes the socket and the request fails at once.
func (p *Provider) waitAgent(ctx context.Context, h *sandboxHandle, ct *container.Container) error {
	hctx, cancel := context.WithTimeout(ctx, agentStartTimeout)
	defer cancel()
	err := p.waitSocket(hctx, h.socket)
	if err == nil {
		err = h.env.Health(hctx)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errdefs.Errorf(errdefs.Unavailable, "the agent of sandbox %s did not answer: %w; its log: %s", h.id, err, logTail(ct.LogPath()))
	}
	return nil
}

// logTail is the end of the init's log, for errors: at most its last KiB
// is read, however much the agent wrote.
func logTail(p string) string {
	f, err := os.Open(p)
	if err != nil {
		return "(none)"
	}
	defer f.Close()
	const max = 1024
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		_, _ = f.Seek(fi.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, max))
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "(empty)"
	}
	return string(b)
}

// envMap is the image's environment ("KEY=value" entries) with the Spec's
// on top.
func envMap(base []string, over map[string]string) map[string]string {
	vals := map[string]string{}
	for _, kv := range base {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			vals[k] = v
		}
	}
	for k, v := range over {
		vals[k] = v
	}
	return vals
}

// limits maps Spec resources onto cgroup limits, refusing what the host
// cannot give.
func (p *Provider) limits(r driver.Resources) (container.Limits, error) {
	l := container.Limits{CPUs: r.CPUs, Pids: p.opts.Pids}
	if r.PIDs > 0 {
		if r.PIDs < minPids {
			return l, errdefs.Errorf(errdefs.InvalidArgument, "a pids limit of %d is below the %d a sandbox's agent needs", r.PIDs, minPids)
		}
		l.Pids = r.PIDs
	}
	if n := runtime.NumCPU(); r.CPUs > float64(n) {
		return l, errdefs.Errorf(errdefs.InvalidArgument, "%g cpus asked, this host has %d", r.CPUs, n)
	}
	if r.CPUs > 0 && r.CPUs < 0.01 {
		return l, errdefs.Errorf(errdefs.InvalidArgument, "%g cpus is below the 0.01 minimum", r.CPUs)
	}
	if r.MemoryMB > 0 {
		total, err := memTotal()
		if err != nil {
			return l, err
		}
		l.MemoryBytes = int64(r.MemoryMB) << 20
		if l.MemoryBytes > total {
			return l, errdefs.Errorf(errdefs.InvalidArgument, "memory %d MB asked, this host has %d MB", r.MemoryMB, total>>20)
		}
		if r.MemoryMB < minMemoryMB {
			return l, errdefs.Errorf(errdefs.InvalidArgument, "memory %d MB is below the %d MB a sandbox's agent needs", r.MemoryMB, minMemoryMB)
		}
	}
	if r.GPUs > 0 {
		return l, errdefs.Errorf(errdefs.NotSupported, "the local provider has no GPUs")
	}
	return l, nil
}

// diskBytes is Spec's StorageMB as the container's disk limit
// (container.Config.DiskBytes); none where the host cannot make one (see
// diskSupport).
func diskBytes(r driver.Resources) (int64, error) {
	if r.StorageMB <= 0 || diskSupport() != nil {
		return 0, nil
	}
	if int64(r.StorageMB)<<20 < container.MinDiskBytes {
		return 0, errdefs.Errorf(errdefs.InvalidArgument, "storage %d MB is below the %d MB minimum (ext4's own metadata)", r.StorageMB, container.MinDiskBytes>>20)
	}
	return int64(r.StorageMB) << 20, nil
}

// minMemoryMB leaves the agent (a Go program of ~10 MB resident) room.
const minMemoryMB = 32

// minPids leaves the agent's ~30 threads room, and a command or two.
const minPids = 64

// memTotal returns the host's MemTotal in bytes.
func memTotal() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("read host memory size: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 64<<10))
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 2 && fs[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fs[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse MemTotal %q: %w", fs[1], err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no MemTotal in /proc/meminfo")
}

// handle opens the envd client of a sandbox.
func (p *Provider) handle(m *meta) (*sandboxHandle, error) {
	hc := envd.UnixHTTPClient(m.Socket)
	c, err := envd.NewClient(envd.UnixBaseURL, hc, envd.WithAccessToken(m.Token))
	if err != nil {
		return nil, err
	}
	return &sandboxHandle{p: p, id: m.ID, socket: m.Socket, token: m.Token, workDir: m.WorkDir, http: hc, env: c}, nil
}
