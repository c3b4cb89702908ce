package osbserve

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"sync"
	"time"

	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/serve/internal/core"
	"github.com/berth-sh/berth/serve/opensandbox"
)

// instance is a sandbox of the OpenSandbox API: Pending while the
// provider creates it, then Running (its record is in the server's store),
// or Failed (kept a while so that GET says why).
type instance struct {
	id, keyID  string
	token      string // the record's access token, handed out as execd's; a secret
	image      string
	entrypoint []string
	metadata   map[string]string
	extensions map[string]string
	createdAt  time.Time
	ttl        time.Duration
	egress     *opensandbox.Egress
	ready      chan struct{} // closed when it leaves Pending
	live       bool          // its record was added (guarded by Server.mu)

	mu         sync.Mutex
	state      string
	reason     string
	message    string
	transition time.Time
	cancel     context.CancelFunc // of the create; nil once it ended
	execd      *opensandbox.Execd
}

func (b *instance) snapshot() (state, reason, message string, at time.Time, execd *opensandbox.Execd) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state, b.reason, b.message, b.transition, b.execd
}

// leave moves a Pending sandbox to state; false when it had left already.
func (b *instance) leave(state, reason, message string, execd *opensandbox.Execd) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != opensandbox.StatePending {
		return false
	}
	b.state, b.reason, b.message, b.transition, b.execd, b.cancel = state, reason, message, time.Now(), execd, nil
	close(b.ready)
	return true
}

// closers closes each, in order.
type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// start accepts a create: the key's slot and resources are reserved (the
// caller did), the sandbox is Pending, and the provider creates it in the
// background, so that a slow image pull outlives no client's request
// timeout.
func (o *Server) start(keyID string, req *opensandbox.CreateRequest, c osbCreate, id string) *instance {
	b := &instance{id: id, keyID: keyID, token: core.RandomToken(), image: c.image, entrypoint: req.Entrypoint,
		metadata: maps.Clone(req.Metadata), extensions: maps.Clone(req.Extensions), createdAt: time.Now(), ttl: c.spec.TTL,
		egress: opensandbox.NewEgress(c.policy, c.policyMode), ready: make(chan struct{}),
		state: opensandbox.StatePending, reason: "provisioning", message: "the provider is creating the sandbox"}
	b.transition = b.createdAt
	ctx, cancel := context.WithCancel(o.life)
	b.cancel = cancel
	o.mu.Lock()
	o.byID[id] = b
	o.mu.Unlock()
	o.wg.Go(func() {
		defer cancel()
		o.provision(ctx, b, c)
	})
	return b
}

// provision runs in the background: the provider's create, the data planes,
// then the record goes live. Whatever fails on the way deletes what was
// made and leaves the sandbox Failed.
func (o *Server) provision(ctx context.Context, b *instance, c osbCreate) {
	sb, err := o.p.Create(ctx, c.spec)
	if err != nil {
		o.c.Release(b.keyID, c.spec.Resources)
		o.m.Creates.WithLabelValues("failed").Inc()
		o.log.Warn("opensandbox create failed", "sandbox", b.id, "key", b.keyID, "image", c.spec.Image, "error", err)
		o.fail(b, "provision_failed", "creating the sandbox: "+err.Error())
		return
	}
	// Its ports are private: the E2B port routes take its traffic token,
	// its owner's key or its execd token.
	rec := &core.Record{ID: b.id, KeyID: b.keyID, Token: b.token, Image: c.spec.Image, Metadata: maps.Clone(b.metadata),
		Internet: c.spec.Network.Mode == sandbox.NetworkPublic, StartedAt: b.createdAt, Sandbox: sb, Resources: c.spec.Resources,
		TrafficToken: o.c.NewTrafficToken(b.keyID, b.id), PortCredentials: portCredentials}
	if rec.Metadata == nil {
		rec.Metadata = map[string]string{}
	}
	if err := o.c.AttachPlane(ctx, rec); err != nil {
		o.c.Abandon(rec)
		o.fail(b, "provision_failed", "setting up the sandbox's data plane: "+err.Error())
		return
	}
	oo := o.opts.OpenSandbox
	execd := opensandbox.New(sb, opensandbox.Options{HomeDir: o.opts.HomeDir, MaxUploadBytes: o.opts.MaxUploadBytes,
		MaxBodyBytes: o.opts.MaxBodyBytes, MaxLogBytes: oo.MaxLogBytesPerCommand, MaxSandboxLogBytes: oo.MaxLogBytesPerSandbox,
		Budget: o.budget(b.keyID), OnExec: func() { o.m.Execs.Inc() }, Logger: o.log})
	// The record's closer ends execd and forgets the OpenSandbox sandbox,
	// whichever way the record goes: DELETE, its TTL, the E2B API, Close.
	rec.Closer = closers{rec.Closer, execd, closerFunc(func() error {
		o.forgetLive(b) // a failed create keeps b, Failed
		return nil
	})}
	if !keepAlive(b.entrypoint) {
		if _, err := execd.Start(b.entrypoint, nil); err != nil {
			o.c.Abandon(rec)
			o.fail(b, "entrypoint_failed", "starting the entrypoint: "+err.Error())
			return
		}
	}
	left := b.ttl - time.Since(b.createdAt)
	if left <= 0 {
		o.c.Abandon(rec)
		o.fail(b, "ttl_expiry", "the sandbox's timeout passed before it was created")
		return
	}
	o.c.Arm(rec, left)
	// A DELETE while Pending has removed b; the record must not go live.
	// The record is findable before b is Running: a call that waited for
	// Running (a proxied one, the create's answer) then finds it. b is
	// Pending while it is in byID under o.mu, so it leaves Pending here.
	o.mu.Lock()
	live := o.byID[b.id] == b && o.c.Add(rec)
	if live {
		b.live = true
		b.leave(opensandbox.StateRunning, "ready", "", execd)
	}
	o.mu.Unlock()
	if !live {
		o.c.Abandon(rec)
		o.fail(b, "user_delete", "the sandbox was deleted, or the server stopped, while it was created")
		return
	}
	o.m.Creates.WithLabelValues("ok").Inc()
	o.log.Info("created sandbox", "api", "opensandbox", "sandbox", b.id, "backend_id", sb.ID(), "key", b.keyID,
		"image", c.spec.Image, "ttl", b.ttl, "network", c.spec.Network.Mode, "duration", time.Since(b.createdAt))
}

// fail leaves b Failed and keeps it for failedKeep (at most as many failed
// sandboxes per key as it may hold live ones), unless it was deleted.
func (o *Server) fail(b *instance, reason, message string) {
	if !b.leave(opensandbox.StateFailed, reason, message, nil) {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.byID[b.id] != b {
		return
	}
	var oldest *instance
	var oldestAt time.Time
	n := 0
	for _, x := range o.byID {
		if st, _, _, at, _ := x.snapshot(); x.keyID == b.keyID && st == opensandbox.StateFailed {
			n++
			if oldest == nil || at.Before(oldestAt) {
				oldest, oldestAt = x, at
			}
		}
	}
	if n > o.opts.MaxSandboxesPerKey {
		delete(o.byID, oldest.id)
	}
	time.AfterFunc(failedKeep, func() { o.forget(b) })
}

// failedKeep is how long a Failed sandbox stays visible.
const failedKeep = 10 * time.Minute

// forgetLive forgets b if its record went live.
func (o *Server) forgetLive(b *instance) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if b.live && o.byID[b.id] == b {
		delete(o.byID, b.id)
	}
}

// forget removes b from the API's table (if it is still b there).
func (o *Server) forget(b *instance) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.byID[b.id] == b {
		delete(o.byID, b.id)
	}
}

// cancelPending removes a Pending sandbox and stops its create; false when
// it is not Pending.
func (o *Server) cancelPending(b *instance) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != opensandbox.StatePending || o.byID[b.id] != b {
		return false
	}
	delete(o.byID, b.id)
	if b.cancel != nil {
		b.cancel()
	}
	return true
}

// waitReady waits up to d (and ctx) for b to leave Pending.
func waitReady(ctx context.Context, b *instance, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-b.ready:
	case <-t.C:
	case <-ctx.Done():
	}
}

// writeOSBClassed answers a failed lifecycle call with the status of the
// error's class.
func writeOSBClassed(w http.ResponseWriter, err error) {
	status := sandbox.HTTPStatus(err)
	code := opensandbox.CodeInternal
	switch sandbox.ClassOf(err) {
	case sandbox.InvalidArgument:
		code = opensandbox.CodeInvalidParameter
	case sandbox.NotSupported:
		status, code = http.StatusBadRequest, opensandbox.CodeNotSupported
	case sandbox.NotFound:
		code = opensandbox.CodeNotFound
	case sandbox.ResourceExhausted:
		code = opensandbox.CodeQuota
	case sandbox.Unavailable, sandbox.DeadlineExceeded:
		code = opensandbox.CodeUnavailable
	}
	if d := sandbox.RetryAfterOf(err); d > 0 {
		w.Header().Set("Retry-After", sandbox.RetryAfterHeader(d))
	}
	opensandbox.WriteError(w, status, code, err.Error())
}
