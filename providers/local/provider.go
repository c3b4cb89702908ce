package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/providers/local/container"
	"github.com/berth-sh/berth/providers/local/image"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

var (
	_ driver.Provider      = (*Provider)(nil)
	_ driver.ImagePreparer = (*Provider)(nil)
	_ driver.ImageBuilder  = (*Provider)(nil)
	_ driver.Reaper        = (*Provider)(nil)
)

// Provider is the local driver on one state directory. Several Provider
// values, in one process or several, may share a state directory.
type Provider struct {
	opts      Options
	state     string
	sandboxes string
	store     *image.Store
	rt        container.Runtime
	log       *slog.Logger

	agentOnce sync.Once
	agentRun  launch
	agentErr  error

	seedMu sync.Mutex

	// cts are the containers this value created and has not deleted: their
	// handles hold the pidfd that reaps the init (see container.SetSubreaper).
	mu  sync.Mutex
	cts map[string]*container.Container

	pool *pool // nil without Options.Pool

	owner *os.File // the owner lock (owners.go)
}

// geteuid is a variable so that tests run as root can see the other path.
var geteuid = os.Geteuid

// maxSocketPath is the room in sockaddr_un for a path and its NUL.
const maxSocketPath = 107

// ProviderCapabilities returns what every local provider can do, as a new
// value each call (the registry entry reports it without opening one):
// the interfaces of its handles (driver.Derive) and the facts they cannot
// show.
func ProviderCapabilities() driver.Capabilities {
	return driver.Derive[*Provider, *sandboxHandle, *envd.Process](driver.Capabilities{
		ResourceMode: driver.ResourcesLimits,
		Networks:     []driver.NetworkMode{driver.NetworkNone, driver.NetworkPublic},
		BuildImage:   true,
		// StorageMB is a disk of that size (container.Config.DiskBytes)
		// where the host can make one.
		Storage: diskSupport() == nil,
		Ports:   []driver.PortProtocol{driver.PortHTTP, driver.PortTCP},
	})
}

// diskSupport probes once whether this host makes disk limits. Without
// mkfs.ext4 or loop devices (a container without /dev/loop-control, say)
// the provider still runs, with Capabilities.Storage false and StorageMB
// not enforced, as on providers that have no disk knob: refusing every
// Harbor task (they all carry a storage_mb) would make local unusable
// there. New says so once, as a warning.
var diskSupport = sync.OnceValue(container.DiskSupported)

// New opens the provider. It needs root and the OCI runtime, and makes this
// process a child subreaper (container.SetSubreaper), so that the inits of
// the containers it starts are reaped here whatever the host's PID 1 does.
func New(o Options) (*Provider, error) {
	if geteuid() != 0 {
		return nil, errNotRoot
	}
	if o.Runtime == "" {
		o.Runtime = "runc"
	}
	if _, err := exec.LookPath(o.Runtime); err != nil {
		return nil, errdefs.Errorf(errdefs.NotSupported, "the local provider needs the OCI runtime %q (%w); install it with: apt-get install %s", o.Runtime, err, filepath.Base(o.Runtime))
	}
	if o.Pids < 0 {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "pids limit %d is negative", o.Pids)
	}
	if o.Pids == 0 {
		o.Pids = DefaultPids
	}
	if cp := o.CgroupParent; cp != "" && (filepath.IsAbs(cp) || !filepath.IsLocal(cp)) {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "cgroup parent %q must be a relative path without ..", cp)
	}
	if err := o.Pool.validate(); err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := diskSupport(); err != nil {
		o.Logger.Warn("local: disk limits are off (StorageMB is not enforced)", "reason", err)
	}
	if isGVisor(o.Runtime) && o.Pool.Size > 0 {
		o.Logger.Info("local: no pool under runsc (a pooled sandbox switches its root from the host, which gVisor's own file system does not see); every create is cold")
		o.Pool = Pool{}
	}
	state, err := StateDir(o.StateDir)
	if err != nil {
		return nil, err
	}
	p := &Provider{
		opts:      o,
		state:     state,
		sandboxes: filepath.Join(state, "sandboxes"),
		log:       o.Logger,
		rt:        container.Runtime{Binary: o.Runtime, Root: filepath.Join(state, "runc"), CgroupParent: o.CgroupParent},
		cts:       map[string]*container.Container{},
	}
	if sock := p.socketPath(p.dir("sb-0123456789abcdef")); len(sock) > maxSocketPath {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "state dir %s is too long: the agent sockets under it (%d bytes) would pass the %d bytes a unix socket path may have", state, len(sock), maxSocketPath)
	}
	if err := os.MkdirAll(p.sandboxes, 0o700); err != nil {
		return nil, fmt.Errorf("local: state dir: %w", err)
	}
	if p.store, err = image.Open(state, o.Image); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	if err := container.SetSubreaper(); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	if err := p.register(); err != nil {
		return nil, err
	}
	if dead := p.deadOwners(); dead > 0 {
		p.cleanAfterCrash(dead)
	}
	p.pool = newPool(p, o.Pool)
	return p, nil
}

// StateDir is the directory the provider keeps its state in.
func (p *Provider) StateDir() string { return p.state }

// Capabilities reports ProviderCapabilities.
func (p *Provider) Capabilities() driver.Capabilities { return ProviderCapabilities() }

// Close removes the pool's ready sandboxes, if any, and releases the
// owner lock (see owners.go). Sandboxes handed out live on until their TTL
// or a Delete, from this process or another.
func (p *Provider) Close() error {
	err := p.pool.close()
	p.unregister()
	return err
}

// agent returns how the agent binary starts in a sandbox.
func (p *Provider) agent(ctx context.Context) (launch, error) {
	p.agentOnce.Do(func() { p.agentRun, p.agentErr = p.opts.agentLaunch(ctx) })
	return p.agentRun, p.agentErr
}

// Connect returns a handle to a live sandbox. An expired or dead one is
// NotFound, and what it left is removed on the way.
func (p *Provider) Connect(ctx context.Context, id string) (driver.Sandbox, error) {
	m, err := p.readMeta(id)
	if err != nil {
		return nil, err
	}
	if !p.alive(m) {
		p.cleanLater(ctx, id)
		return nil, errdefs.Errorf(errdefs.NotFound, "sandbox %s has ended (expired at %s or its agent died)", id, m.Expires.Format(time.RFC3339))
	}
	return p.handle(m)
}

// alive reports whether a sandbox is within its TTL and its agent accepts
// connections. A dead agent's socket refuses at once: the listening socket
// was closed with the agent, its only holder.
func (p *Provider) alive(m *meta) bool {
	if !time.Now().Before(m.Expires) {
		return false
	}
	c, err := net.DialTimeout("unix", m.Socket, 2*time.Second)
	if err != nil {
		// Only a refusal or a missing socket means dead: a full backlog
		// (EAGAIN) or a slow agent is a busy sandbox, not an ended one.
		return !errors.Is(err, unix.ECONNREFUSED) && !errors.Is(err, unix.ENOENT)
	}
	c.Close()
	return true
}

// cleanLater removes an ended sandbox's leftovers when nobody else is at it.
func (p *Provider) cleanLater(ctx context.Context, id string) {
	if err := p.destroy(ctx, id, false); err != nil && !errors.Is(err, errBusy) && !errors.Is(err, errdefs.ErrNotFound) {
		p.log.Warn("local: removing an ended sandbox failed; berth sandboxes reap retries", "id", id, "error", err)
	}
}

// ids lists the sandbox directories, sorted.
func (p *Provider) ids() ([]string, error) {
	ents, err := os.ReadDir(p.sandboxes)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && idPattern.MatchString(e.Name()) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// List returns the live sandboxes carrying every label. Ended ones are not
// listed; their leftovers are removed on the way.
func (p *Provider) List(ctx context.Context, labels map[string]string) ([]driver.Info, error) {
	ids, err := p.ids()
	if err != nil {
		return nil, err
	}
	var out []driver.Info
	for _, id := range ids {
		m, err := p.readMeta(id)
		if err != nil {
			continue // being created, or a leftover for Reap
		}
		if !p.alive(m) {
			p.cleanLater(ctx, id)
			continue
		}
		if driver.MatchLabels(m.Labels, labels) {
			out = append(out, m.info())
		}
	}
	return out, nil
}

// Delete destroys the sandbox: the container (kill, runtime state, mount,
// cgroups) and its directory. It survives cancellation; a second Delete is
// NotFound.
func (p *Provider) Delete(ctx context.Context, id string) error {
	if !idPattern.MatchString(id) {
		return errdefs.Errorf(errdefs.NotFound, "no sandbox %q", id)
	}
	return p.destroy(context.WithoutCancel(ctx), id, true)
}

// destroy tears a sandbox down under its directory lock. A sandbox without
// meta.json is only destroyed when nobody holds the lock (a creator that
// died); with wait set, Delete waits for a concurrent teardown and then
// finds nothing.
func (p *Provider) destroy(ctx context.Context, id string, wait bool) error {
	dir := p.dir(id)
	if wait {
		if _, err := os.Stat(filepath.Join(dir, metaFile)); errors.Is(err, os.ErrNotExist) {
			// Being created (or a dead creator's leftover, for Reap).
			return errdefs.Errorf(errdefs.NotFound, "no sandbox %s", id)
		}
	}
	l, err := lockDir(dir, wait)
	if err != nil {
		return err
	}
	defer l.unlock()
	if wait {
		if _, err := os.Stat(filepath.Join(dir, metaFile)); err != nil {
			return errdefs.Errorf(errdefs.NotFound, "no sandbox %s", id)
		}
	}
	// meta.json goes first: from here on the sandbox is not listed or
	// connectable, even if a later step fails and Reap has to finish.
	if err := os.Remove(filepath.Join(dir, metaFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	if err := p.removeContainer(ctx, id); err != nil {
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	if err := removeSandboxDir(dir); err != nil {
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	return nil
}

// removeContainer deletes the sandbox's container, through the handle this
// value holds or one loaded from disk.
func (p *Provider) removeContainer(ctx context.Context, id string) error {
	p.mu.Lock()
	ct := p.cts[id]
	p.mu.Unlock()
	ctDir := filepath.Join(p.dir(id), containerDir)
	if ct == nil {
		var err error
		ct, err = p.rt.Load(ctx, ctDir)
		if errdefs.ClassOf(err) == errdefs.NotFound {
			return p.removeHalfMade(ctx, id, ctDir)
		}
		if err != nil {
			return err
		}
	}
	if err := ct.Delete(ctx); err != nil {
		return err
	}
	p.mu.Lock()
	delete(p.cts, id)
	p.mu.Unlock()
	return nil
}

// removeHalfMade removes a container directory that has no container state:
// its creator died inside container.Create, after the overlay mount and
// before the state was saved. If the runtime had started the container, its
// own state names the init and the cgroups, and `runtime delete --force`
// removes them; then only the mounts are left (the overlay, and the disk
// of a disk limit, whose loop device goes with its unmount).
func (p *Provider) removeHalfMade(ctx context.Context, id, ctDir string) error {
	if _, err := os.Lstat(filepath.Join(p.rt.Root, id)); err == nil {
		out, err := exec.CommandContext(ctx, p.opts.Runtime, "--root", p.rt.Root, "delete", "--force", id).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s delete --force %s: %w: %s", p.opts.Runtime, id, err, out)
		}
	}
	if _, err := os.Lstat(ctDir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return container.RemoveDir(ctDir)
}

// Reap removes every sandbox that has ended (expired, or its agent died)
// and every leftover of a creator that died mid-create, and returns their
// IDs. Sandboxes being created or deleted by someone else are left alone.
func (p *Provider) Reap(ctx context.Context) ([]string, error) {
	ids, err := p.ids()
	if err != nil {
		return nil, err
	}
	var reaped []string
	var errs []error
	for _, id := range ids {
		m, err := p.readMeta(id)
		if err == nil && p.alive(m) {
			continue
		}
		if err != nil && errdefs.ClassOf(err) != errdefs.NotFound {
			// A corrupt record: the sandbox cannot be reached, so reap it.
			p.log.Warn("local: reaping a sandbox with an unreadable record", "id", id, "error", err)
		}
		switch err := p.destroy(ctx, id, false); {
		case err == nil:
			reaped = append(reaped, id)
		case errors.Is(err, errBusy), errors.Is(err, errdefs.ErrNotFound):
		default:
			errs = append(errs, err)
		}
	}
	return reaped, errors.Join(errs...)
}
