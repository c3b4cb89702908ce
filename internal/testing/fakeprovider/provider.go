package fakeprovider

import (
	"context"
	"path/filepath"
	"sync"
	"time"

	"github.com/berth-sh/berth/internal/testing/fakeengine"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Options configure New.
type Options struct {
	// StateDir holds one directory per sandbox; required. Providers opened
	// on the same StateDir share their sandboxes.
	StateDir string
	// Faults, when set, steers failures; the test keeps it to change them.
	Faults *Injector
	// MaxTTL is reported in Capabilities (zero: no limit).
	MaxTTL time.Duration
	// NativeTrees makes sandboxes implement driver.TreeUploader and
	// driver.TreeDownloader, so that both paths of sandbox.Upload and
	// Download can be tested.
	NativeTrees bool
	// Minimal makes handles implement the required driver interfaces and
	// nothing more (no SetTimeout, no Signal, no trees), so that callers'
	// NotSupported paths and capability gates can be tested. It wins over
	// NativeTrees.
	Minimal bool
	// Busybox, when set to a static busybox binary, gives every sandbox a
	// minimal root (busybox and its applets in /bin, /tmp, /dev/null) and
	// runs commands chrooted into it, so absolute paths in scripts
	// (/logs/verifier/reward.txt) land in the sandbox and not on the host.
	// As root the chroot is direct; without root each command gets a user
	// namespace of its own (internal/hostproc; fakeengine.Busybox says
	// whether that works here).
	Busybox string
}

type provider struct {
	opts Options
	eng  *fakeengine.Engine
}

var _ driver.Provider = (*provider)(nil)

// engines are the engines of this process by state dir, so that every
// provider value on one dir sees the same sandboxes.
var engines = struct {
	sync.Mutex
	m map[string]*fakeengine.Engine
}{m: map[string]*fakeengine.Engine{}}

// New opens a fake provider on opts.StateDir, creating the directory.
func New(opts Options) (driver.Provider, error) {
	if opts.StateDir == "" {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "fakeprovider: Options.StateDir is required")
	}
	state, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, errdefs.Classify(errdefs.InvalidArgument, err)
	}
	engines.Lock()
	defer engines.Unlock()
	eng := engines.m[state]
	if eng == nil {
		if eng, err = fakeengine.New(fakeengine.Options{Dir: state}); err != nil {
			return nil, err
		}
		engines.m[state] = eng
	}
	return &provider{opts: opts, eng: eng}, nil
}

func (p *provider) Capabilities() driver.Capabilities { return CapabilitiesOf(p.opts) }

// CapabilitiesOf is what a fake provider opened with opts can do, derived
// from the handle types the options select (for a registry entry, which
// reports it without opening the provider).
func CapabilitiesOf(opts Options) driver.Capabilities {
	c := driver.Capabilities{
		ResourceMode: driver.ResourcesLimits,
		Networks:     []driver.NetworkMode{driver.NetworkNone},
		MaxTTL:       opts.MaxTTL,
		Ports:        []driver.PortProtocol{driver.PortHTTP, driver.PortTCP},
	}
	switch {
	case opts.Minimal:
		return driver.Derive[*provider, minimalSandbox, minimalProcess](c)
	case opts.NativeTrees:
		return driver.Derive[*provider, *treeSandbox, *process](c)
	}
	return driver.Derive[*provider, *sandbox, *process](c)
}

func (p *provider) Close() error { return nil }

// Create does not look at ctx: like a remote create already sent, it
// completes, and the wrapper is what deletes a sandbox nobody waits for.
func (p *provider) Create(_ context.Context, spec driver.Spec) (driver.Sandbox, error) {
	f := p.opts.Faults.Get()
	if f.FailCreate != nil {
		return nil, f.FailCreate
	}
	if f.CreateDelay > 0 {
		time.Sleep(f.CreateDelay)
	}
	sb, err := p.eng.Create(fakeengine.Spec{
		ID: "fk-" + fakeengine.RandomHex(8), Image: spec.Image, Labels: spec.Labels, Env: spec.Env,
		WorkDir: spec.WorkDir, TTL: spec.TTL, Layout: layout(p.opts.Busybox),
	})
	if err != nil {
		return nil, err
	}
	return p.handle(sb), nil
}

func (p *provider) handle(sb *fakeengine.Sandbox) driver.Sandbox {
	s := &sandbox{p: p, sb: sb}
	switch {
	case p.opts.Minimal:
		return minimalSandbox{s}
	case p.opts.NativeTrees:
		return &treeSandbox{s}
	}
	return s
}

func (p *provider) Connect(_ context.Context, id string) (driver.Sandbox, error) {
	sb, err := p.eng.Get(id)
	if err != nil {
		return nil, err
	}
	return p.handle(sb), nil
}

func (p *provider) List(ctx context.Context, labels map[string]string) ([]driver.Info, error) {
	var out []driver.Info
	for _, sb := range p.eng.List(labels) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out = append(out, driver.Info{
			ID: sb.ID, Image: sb.Image, Labels: sb.Labels(), State: "running",
			CreatedAt: sb.Created, ExpiresAt: sb.Deadline(),
		})
	}
	return out, nil
}

// Delete kills the sandbox's processes and removes it; of two concurrent
// deletes exactly one wins and the other sees NotFound.
func (p *provider) Delete(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := p.opts.Faults.Get().FailDelete; err != nil {
		return err
	}
	sb, err := p.eng.Get(id)
	if err != nil {
		return err
	}
	return sb.End(fakeengine.Deleted)
}
