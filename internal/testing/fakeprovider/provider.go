package fakeprovider

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

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
	// namespace of its own (internal/hostproc; ChrootMissing says whether that
	// works here).
	Busybox string
}

type provider struct {
	opts Options
	// state is StateDir made absolute, so processes and timers of every
	// provider value agree on a sandbox's key.
	state string
}

var _ driver.Provider = (*provider)(nil)

// New opens a fake provider on opts.StateDir, creating the directory.
func New(opts Options) (driver.Provider, error) {
	if opts.StateDir == "" {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "fakeprovider: Options.StateDir is required")
	}
	state, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, errdefs.Classify(errdefs.InvalidArgument, err)
	}
	if err := os.MkdirAll(state, 0o755); err != nil {
		return nil, errdefs.Classify(errdefs.InvalidArgument, err)
	}
	return &provider{opts: opts, state: state}, nil
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
	id := newID()
	dir := filepath.Join(p.state, id)
	if err := os.MkdirAll(filepath.Join(dir, "root"), 0o755); err != nil {
		return nil, errdefs.Classify(errdefs.Unavailable, err)
	}
	if p.opts.Busybox != "" {
		if err := seedRoot(filepath.Join(dir, "root"), p.opts.Busybox); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	now := time.Now()
	m := meta{
		ID: id, Image: spec.Image, Labels: spec.Labels, Env: spec.Env,
		WorkDir: spec.WorkDir, CreatedAt: now, ExpiresAt: now.Add(spec.TTL),
	}
	if err := writeMeta(dir, m); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	schedule(dir, m.ExpiresAt)
	return p.handle(id), nil
}

func (p *provider) handle(id string) driver.Sandbox {
	s := &sandbox{p: p, id: id, dir: filepath.Join(p.state, id)}
	switch {
	case p.opts.Minimal:
		return minimalSandbox{s}
	case p.opts.NativeTrees:
		return &treeSandbox{s}
	}
	return s
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "fk-" + hex.EncodeToString(b)
}

// dirOf maps an ID to its directory, refusing IDs that could name anything
// but a direct child of the state dir.
func (p *provider) dirOf(id string) (string, error) {
	if !idPattern.MatchString(id) {
		return "", errdefs.Errorf(errdefs.InvalidArgument, "malformed sandbox id %q", id)
	}
	return filepath.Join(p.state, id), nil
}

func (p *provider) Connect(_ context.Context, id string) (driver.Sandbox, error) {
	dir, err := p.dirOf(id)
	if err != nil {
		return nil, err
	}
	if _, err := liveMeta(dir); err != nil {
		return nil, err
	}
	return p.handle(id), nil
}

func (p *provider) List(ctx context.Context, labels map[string]string) ([]driver.Info, error) {
	entries, err := os.ReadDir(p.state)
	if err != nil {
		return nil, errdefs.Classify(errdefs.Unavailable, err)
	}
	var out []driver.Info
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !e.IsDir() || !idPattern.MatchString(e.Name()) {
			continue // trash and stray files
		}
		m, err := liveMeta(filepath.Join(p.state, e.Name()))
		if err != nil {
			continue // being created, deleted or just expired
		}
		if !driver.MatchLabels(m.Labels, labels) {
			continue
		}
		out = append(out, driver.Info{
			ID: m.ID, Image: m.Image, Labels: m.Labels, State: "running",
			CreatedAt: m.CreatedAt, ExpiresAt: m.ExpiresAt,
		})
	}
	slices.SortFunc(out, func(a, b driver.Info) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

func (p *provider) Delete(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := p.opts.Faults.Get().FailDelete; err != nil {
		return err
	}
	dir, err := p.dirOf(id)
	if err != nil {
		return err
	}
	return destroy(ctx, dir)
}

// destroy claims the sandbox directory by renaming it (so that of two
// concurrent deletes exactly one wins and the other sees NotFound), kills
// its processes and removes it.
func destroy(ctx context.Context, dir string) error {
	trash := filepath.Join(filepath.Dir(dir), ".trash-"+filepath.Base(dir)+"-"+newID())
	if err := os.Rename(dir, trash); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return errdefs.Errorf(errdefs.NotFound, "sandbox %s does not exist", filepath.Base(dir))
		}
		return errdefs.Classify(errdefs.Unavailable, err)
	}
	unschedule(dir)
	killAll(ctx, dir)
	if err := os.RemoveAll(trash); err != nil {
		return errdefs.Classify(errdefs.Unavailable, err)
	}
	return nil
}
