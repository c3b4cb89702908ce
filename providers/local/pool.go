package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/agent/localagent"
	"github.com/berth-sh/berth/providers/local/container"
	"github.com/berth-sh/berth/providers/local/image"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Pool keeps sandboxes started ahead of Create (see "Pool" in the package
// doc). The zero value is no pool.
type Pool struct {
	// Size is how many sandboxes are kept ready for each network mode and
	// disk limit a Create asked for; 0 is no pool. They have no image yet:
	// any image's Create takes them.
	Size int
}

// poolKey is what a ready sandbox is fixed to when it starts: its network
// namespace, and the disk its upper directory lives on.
type poolKey struct {
	network container.Network
	disk    int64 // container.Config.DiskBytes; 0 is none
}

// maxPoolKeys bounds the buckets: a Create whose key would make one more
// (many distinct storage sizes) is created cold.
const maxPoolKeys = 8

// maxPoolSize bounds Pool.Size: each ready sandbox is an idle agent
// (~5 MiB charged).
const maxPoolSize = 64

func (o Pool) validate() error {
	if o.Size < 0 || o.Size > maxPoolSize {
		return errdefs.Errorf(errdefs.InvalidArgument, "pool size %d: want 0 to %d", o.Size, maxPoolSize)
	}
	return nil
}

// member is a ready sandbox: its container runs on a blank root (see
// container.SwitchRoot) and its agent has started and waits on the config
// pipe, whose write end only this process holds. If this process dies the
// agent reads EOF and exits, and the directory (locked, without
// meta.json) is reaped like any half-made sandbox.
type member struct {
	id   string
	ct   *container.Container
	lock *dirLock
	cfg  *os.File // write end of the agent's config pipe
}

type bucket struct {
	ready  []*member
	failed bool // the last fill failed: wait for the next Create
}

// pool is the provider's set of ready sandboxes, per network mode (the
// container's network namespace is made when it starts), and the
// goroutine that refills it, one sandbox at a time so that refills never
// take more than one core from the sandboxes being used.
type pool struct {
	p    *Provider
	conf Pool

	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}
	done   chan struct{}

	mu      sync.Mutex
	started bool
	closed  bool
	keys    map[poolKey]*bucket // what Creates asked for
	trash   []*member           // removed by the filler or Close

	handed atomic.Int64 // sandboxes Create took from the pool
}

func newPool(p *Provider, conf Pool) *pool {
	if conf.Size == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &pool{
		p: p, conf: conf, ctx: ctx, cancel: cancel,
		wake: make(chan struct{}, 1), done: make(chan struct{}),
		keys: map[poolKey]*bucket{},
	}
}

// take records a Create's demand for k and returns a ready member for
// it, or nil. The filler is woken to replace what was taken.
func (q *pool) take(k poolKey) *member {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	b := q.keys[k]
	if b == nil {
		if len(q.keys) >= maxPoolKeys {
			return nil
		}
		b = &bucket{}
		q.keys[k] = b
	}
	b.failed = false
	if !q.started {
		q.started = true
		go q.fill()
	}
	defer q.kick()
	if len(b.ready) == 0 {
		return nil
	}
	mb := b.ready[0]
	b.ready = b.ready[1:]
	return mb
}

func (q *pool) kick() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// fill keeps every key's bucket at conf.Size until Close.
func (q *pool) fill() {
	defer close(q.done)
	for {
		q.mu.Lock()
		trash := q.trash
		q.trash = nil
		k, b := q.short()
		q.mu.Unlock()
		for _, mb := range trash {
			q.p.removeMember(mb)
		}
		if b == nil {
			select {
			case <-q.wake:
				continue
			case <-q.ctx.Done():
				return
			}
		}
		mb, err := q.p.newMember(q.ctx, k)
		q.mu.Lock()
		switch {
		case err != nil:
			b.failed = true
		case q.closed:
			q.trash = append(q.trash, mb)
		default:
			b.ready = append(b.ready, mb)
		}
		q.mu.Unlock()
		if err != nil {
			if q.ctx.Err() != nil {
				return
			}
			q.p.log.Warn("local: starting a pooled sandbox failed; the pool waits for the next create", "network", k.network, "disk_bytes", k.disk, "error", err)
		}
	}
}

// short returns a key whose bucket lacks ready members: the emptiest
// first, then network none, then the smaller disk.
func (q *pool) short() (poolKey, *bucket) {
	var best poolKey
	var bb *bucket
	for k, b := range q.keys {
		if b.failed || len(b.ready) >= q.conf.Size {
			continue
		}
		if bb == nil || len(b.ready) < len(bb.ready) || len(b.ready) == len(bb.ready) &&
			(k.network < best.network || k.network == best.network && k.disk < best.disk) {
			best, bb = k, b
		}
	}
	return best, bb
}

// full reports whether every key asked for has conf.Size ready
// members (tests and benchmarks wait for it).
func (q *pool) full() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, b := q.short()
	return b == nil
}

// close stops the filler and removes every ready member. It is
// idempotent; sandboxes already handed out are not touched.
func (q *pool) close() error {
	if q == nil {
		return nil
	}
	q.mu.Lock()
	q.closed = true
	started := q.started
	q.mu.Unlock()
	q.cancel()
	if started {
		<-q.done
	}
	q.mu.Lock()
	left := q.trash
	q.trash = nil
	for k, b := range q.keys {
		left = append(left, b.ready...)
		delete(q.keys, k)
	}
	q.mu.Unlock()
	var errs []error
	for _, mb := range left {
		errs = append(errs, q.p.removeMember(mb))
	}
	return errors.Join(errs...)
}

// newMember starts a sandbox with no image and no Spec yet, for k: a
// blank root, its disk if k has one, no limits but the pids limit, root's
// agent waiting for its config. Its directory stays locked until it is
// taken.
func (p *Provider) newMember(ctx context.Context, k poolKey) (*member, error) {
	run, err := p.agent(ctx)
	if err != nil {
		return nil, err
	}
	id, dir, lock, err := p.newDir()
	if err != nil {
		return nil, err
	}
	mb := &member{id: id, lock: lock}
	if err := p.startMember(ctx, mb, run, k); err != nil {
		if mb.cfg != nil {
			mb.cfg.Close()
		}
		os.RemoveAll(dir)
		lock.unlock()
		return nil, err
	}
	waitConfigRead(ctx, mb.ct.Pid())
	return mb, nil
}

// blankDir, in the state directory, holds the blank roots of pooled
// sandboxes (container.MakeBlankRoot), their lower directory until a
// Create switches them to its image's.
const blankDir = "blank"

// waitConfigRead waits, up to agentReadyTimeout, until a thread of the
// agent pid is blocked reading its config fd: then its runtime and package
// inits are done, and a Create that takes it pays none of that. It is a
// best effort (a member whose agent is still starting works, only later),
// so that the filler counts a member ready only when it is, and starts the
// next one only then.
func waitConfigRead(ctx context.Context, pid int) {
	want := fmt.Sprintf("%d 0x%x ", unix.SYS_READ, localagent.ConfigFD)
	tasks := fmt.Sprintf("/proc/%d/task", pid)
	deadline := time.Now().Add(agentReadyTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		ents, err := os.ReadDir(tasks)
		if err != nil {
			return // gone: taking it fails and removes it
		}
		for _, e := range ents {
			b, _ := os.ReadFile(filepath.Join(tasks, e.Name(), "syscall"))
			if strings.HasPrefix(string(b), want) {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
}

// agentReadyTimeout bounds waitConfigRead; an agent starts in ~10 ms.
const agentReadyTimeout = 2 * time.Second

func (p *Provider) startMember(ctx context.Context, mb *member, run launch, k poolKey) error {
	ln, err := container.ListenUnix(filepath.Join(p.dir(mb.id), socketFile))
	if err != nil {
		return err
	}
	defer ln.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	mb.cfg = w
	c := container.Config{
		ID:         mb.id,
		Blank:      true,
		Dir:        filepath.Join(p.dir(mb.id), containerDir),
		Init:       append(slices.Clone(run.argv), "agent"),
		InitBinary: run.initBinary,
		Mounts:     run.mounts,
		ExtraFiles: []*os.File{ln, r}, // fds 3 and 4: localagent.ListenFD, ConfigFD
		Limits:     container.Limits{Pids: p.opts.Pids},
		Network:    k.network,
		DiskBytes:  k.disk,
	}
	blank, err := container.MakeBlankRoot(filepath.Join(filepath.Dir(p.sandboxes), blankDir), &c)
	if err != nil {
		return err
	}
	c.LowerDirs = []string{blank}
	if mb.ct, err = p.rt.Create(ctx, c); err != nil {
		return fmt.Errorf("start pooled sandbox %s: %w", mb.id, err)
	}
	return nil
}

// removeMember deletes a member that was never handed out.
func (p *Provider) removeMember(mb *member) error {
	mb.cfg.Close() // the agent reads EOF and exits, if it still runs
	err := mb.ct.Delete(context.Background())
	if err == nil {
		err = os.RemoveAll(p.dir(mb.id))
	}
	mb.lock.unlock()
	if err != nil {
		p.log.Warn("local: removing a pooled sandbox failed; berth sandboxes reap retries", "id", mb.id, "error", err)
	}
	return err
}

// poolRequest is a Create's resolved Spec.
type poolRequest struct {
	spec    driver.Spec
	img     image.Image
	who     identity
	workDir string
	key     poolKey
	lim     container.Limits
}

// fromPool hands a ready sandbox to Create, or returns nil when there is
// none (no pool, none ready, or a Spec a ready one cannot take), and
// Create starts one itself. A ready one that fails to take its Spec is
// removed, and Create starts one itself too.
func (p *Provider) fromPool(ctx context.Context, r poolRequest) *sandboxHandle {
	// An agent running as a numeric uid without a passwd entry is fixed
	// at start; pooled agents run as root and switch per command.
	if p.pool == nil || r.who.agent.UID != 0 || r.who.agent.GID != 0 || len(r.who.agent.AdditionalGIDs) > 0 {
		return nil
	}
	token := newToken()
	now := time.Now()
	// The agent started with no image: the image's environment comes
	// with the Spec's, as a cold start has both in the init's.
	env := envMap(r.img.Config.Env, r.spec.Env)
	cfg := localagent.Config{Token: token, Deadline: now.Add(r.spec.TTL).UTC(), User: r.who.user, Dir: r.workDir, Env: env}
	b, err := localagent.EncodeConfig(cfg)
	if err != nil {
		return nil // Create's own path reports it
	}
	mb := p.pool.take(r.key)
	if mb == nil {
		return nil
	}
	m := &meta{
		ID: mb.id, Image: r.img.Ref, ImageID: r.img.ID, Labels: r.spec.Labels,
		Created: now.UTC(), Expires: cfg.Deadline,
		Token: token, Socket: filepath.Join(p.dir(mb.id), socketFile),
		WorkDir: r.workDir, Network: string(r.spec.Network.Mode),
	}
	h, err := p.claim(ctx, mb, m, r, b)
	if err != nil {
		// Not another ready one: the cause may be the image (its layers
		// removed meanwhile), and the cold path reports it.
		p.log.Warn("local: a pooled sandbox failed to start its Spec; creating one cold", "id", mb.id, "error", err)
		return nil
	}
	p.pool.handed.Add(1)
	return h
}

// claim gives a member its Spec: limits in its cgroups, the image as its
// root, the agent's config down the pipe, the first answer, then
// meta.json, which makes it a sandbox like any other. On failure the
// member is removed.
func (p *Provider) claim(ctx context.Context, mb *member, m *meta, r poolRequest, cfg []byte) (*sandboxHandle, error) {
	err := mb.ct.SetLimits(r.lim)
	if err == nil {
		err = mb.ct.SwitchRoot(r.img.Layers)
	}
	if err == nil {
		_, err = mb.cfg.Write(cfg)
		if cerr := mb.cfg.Close(); err == nil {
			err = cerr
		}
	}
	var h *sandboxHandle
	if err == nil {
		h, err = p.handle(m)
	}
	if err == nil {
		err = p.waitAgent(ctx, h, mb.ct)
	}
	if err == nil {
		err = p.writeMeta(m)
	}
	if err != nil {
		if h != nil {
			h.Close()
		}
		return nil, errors.Join(err, p.removeMember(mb))
	}
	p.mu.Lock()
	p.cts[mb.id] = mb.ct
	p.mu.Unlock()
	mb.lock.unlock()
	return h, nil
}
