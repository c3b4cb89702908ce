package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/berth-sh/berth/sandbox"
)

// A stateless server (Options.Stateless) keeps its E2B sandboxes' records
// in the sandboxes themselves: beside IDLabel and LauncherLabel, each
// carries these labels, and its TTL is the provider's. Any replica that
// shares the key file finds a sandbox by listing the provider (for
// Kubernetes, a read of its informer's cache) and rebuilds the record: the
// owner, the token's hash, the template, the network and the resources
// from the labels, the expiry from the provider, and the token itself
// derived from the owner's key (apikeys.Keyring.Derive), so that any
// replica answers connect with it. None of the labels is a secret.
const (
	keyLabel       = ServeLabelPrefix + "key"          // the owner, apikeys.ID
	tokenLabel     = ServeLabelPrefix + "token-sha256" // hex SHA-256 of the access token
	templateLabel  = ServeLabelPrefix + "template"
	internetLabel  = ServeLabelPrefix + "internet" // "true" or "false"
	resourcesLabel = ServeLabelPrefix + "resources"
	// launcherAddedLabel says the server set LauncherLabel, so that it is
	// not given back as the client's metadata.
	launcherAddedLabel = ServeLabelPrefix + "launcher-added"
	// privateTrafficLabel "true": the sandbox's ports need its traffic
	// access token (allowPublicTraffic false), which a replica derives
	// from the owner's key as it does the access token.
	privateTrafficLabel = ServeLabelPrefix + "private-traffic"
)

// tokenMessage is what a sandbox's access token is derived from, with its
// owner's key.
func tokenMessage(id string) string { return "berth-serve/envd-access-token/" + id }

// trafficMessage is what a sandbox's traffic access token is derived from.
func trafficMessage(id string) string { return "berth-serve/traffic-access-token/" + id }

// lookupTimeout bounds the provider calls of one lookup (List, Connect, the
// data plane's set-up).
const lookupTimeout = 30 * time.Second

// errClosed: the store no longer adds records.
var errClosed = errors.New("the server is shutting down")

// sharedStore is the stateless server's sandboxStore. It holds in memory
// only what a process must: the records it has open (a provider handle and
// a data plane each, its timers), rebuilt from the provider on first use
// and dropped when the provider no longer lists them, and the creates in
// flight here (for the per-key limits, which otherwise count what the
// provider lists: replicas creating at the same moment can pass a limit by
// what they have in flight). Records of the OpenSandbox API are not
// shared: they live in the process that made them.
type sharedStore struct {
	s     *Server
	local *store
	loads singleflight.Group

	mu      sync.Mutex
	pending map[string]usage // creates in flight here, by key
	closed  bool
}

var _ sandboxStore = (*sharedStore)(nil)

func newSharedStore(s *Server) *sharedStore {
	return &sharedStore{s: s, local: newStore(), pending: map[string]usage{}}
}

// StateLabels puts a stateless server's record of a sandbox in its
// labels (those of its Spec): everything but the token, whose hash it
// carries, and the sandbox's own handles. launcherAdded says the server
// set LauncherLabel, which is then not the client's metadata.
func StateLabels(labels map[string]string, r *Record, launcherAdded bool) {
	sum := sha256.Sum256([]byte(r.Token))
	labels[keyLabel] = r.KeyID
	labels[tokenLabel] = hex.EncodeToString(sum[:])
	labels[templateLabel] = r.TemplateID
	labels[internetLabel] = strconv.FormatBool(r.Internet)
	res := r.Resources
	labels[resourcesLabel] = fmt.Sprintf("%g/%d/%d/%d", res.CPUs, res.MemoryMB, res.StorageMB, res.PIDs)
	if launcherAdded {
		labels[launcherAddedLabel] = "1"
	}
	if r.TrafficToken != "" {
		labels[privateTrafficLabel] = "true"
	}
}

func parseResources(v string) sandbox.Resources {
	var r sandbox.Resources
	parts := strings.Split(v, "/")
	if len(parts) != 4 {
		return r
	}
	r.CPUs, _ = strconv.ParseFloat(parts[0], 64)
	r.MemoryMB, _ = strconv.Atoi(parts[1])
	r.StorageMB, _ = strconv.Atoi(parts[2])
	r.PIDs, _ = strconv.ParseInt(parts[3], 10, 64)
	return r
}

// infos lists the provider's live sandboxes of this server's kind that
// carry want.
func (ss *sharedStore) infos(want map[string]string) []sandbox.Info {
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	all, err := ss.s.p.List(ctx, want)
	if err != nil {
		ss.s.log.Warn("listing the provider's sandboxes failed", "error", err)
		return nil
	}
	now := time.Now()
	out := all[:0]
	for _, in := range all {
		if in.Labels[IDLabel] == "" || in.Labels[tokenLabel] == "" || in.Labels[keyLabel] == "" {
			continue
		}
		if !in.ExpiresAt.IsZero() && !now.Before(in.ExpiresAt) {
			continue
		}
		out = append(out, in)
	}
	return out
}

// find returns the provider's live sandbox of the E2B ID.
func (ss *sharedStore) find(id string) (sandbox.Info, bool) {
	in := ss.infos(map[string]string{IDLabel: id})
	if len(in) != 1 {
		return sandbox.Info{}, false
	}
	return in[0], true
}

// shallow is a record for listing: no handle, no data plane.
func (ss *sharedStore) shallow(in sandbox.Info) *Record {
	meta := map[string]string{}
	for k, v := range in.Labels {
		if strings.HasPrefix(k, ServeLabelPrefix) || (k == LauncherLabel && in.Labels[launcherAddedLabel] == "1") {
			continue
		}
		meta[k] = v
	}
	tmpl := in.Labels[templateLabel]
	return &Record{
		ID: in.Labels[IDLabel], KeyID: in.Labels[keyLabel], TemplateID: tmpl, Image: ss.s.opts.Templates[tmpl],
		Metadata: meta, Internet: in.Labels[internetLabel] == "true", StartedAt: in.CreatedAt,
		Resources: parseResources(in.Labels[resourcesLabel]), Shared: true, endAt: in.ExpiresAt,
	}
}

// load rebuilds the record of a sandbox another replica made (or this one,
// before it forgot it): Connect, the token from its owner's key, checked
// against the label, the data plane, and the timer of its TTL.
func (ss *sharedStore) load(in sandbox.Info) (*Record, error) {
	rec := ss.shallow(in)
	tok, ok := ss.s.opts.Keys.Derive(rec.KeyID, tokenMessage(rec.ID))
	if !ok {
		return nil, fmt.Errorf("its owner's key is not in this server's key file")
	}
	if sum := sha256.Sum256([]byte(tok)); hex.EncodeToString(sum[:]) != in.Labels[tokenLabel] {
		return nil, fmt.Errorf("its token label does not match its owner's key")
	}
	rec.Token = tok
	if in.Labels[privateTrafficLabel] == "true" {
		// Without its token the ports would be open to anyone: refuse
		// rather than load.
		if rec.TrafficToken, ok = ss.s.opts.Keys.Derive(rec.KeyID, trafficMessage(rec.ID)); !ok {
			return nil, fmt.Errorf("its owner's key is not in this server's key file")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	sb, err := ss.s.p.Connect(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	rec.Sandbox = sb
	if err := ss.s.AttachPlane(ctx, rec); err != nil {
		_ = sb.Close()
		return nil, err
	}
	if !in.ExpiresAt.IsZero() {
		ss.s.Arm(rec, time.Until(in.ExpiresAt))
	}
	return rec, nil
}

// open returns the record of a listed sandbox, loading it the first time.
func (ss *sharedStore) open(in sandbox.Info) *Record {
	id := in.Labels[IDLabel]
	if r := ss.local.get(id); r != nil && r.Sandbox != nil && r.Sandbox.ID() == in.ID {
		ss.refresh(r, in)
		return r
	}
	v, err, _ := ss.loads.Do(id, func() (any, error) {
		if r := ss.local.get(id); r != nil {
			return r, nil
		}
		r, err := ss.load(in)
		if err != nil {
			return nil, err
		}
		if !ss.local.add(r) {
			ss.forget(r)
			return nil, errClosed
		}
		r.added = true
		return r, nil
	})
	if err != nil {
		ss.s.log.Warn("cannot serve a sandbox of the provider", "sandbox", id, "backend_id", in.ID, "error", err)
		return nil
	}
	return v.(*Record)
}

// refresh follows an expiry another replica moved.
func (ss *sharedStore) refresh(r *Record, in sandbox.Info) {
	if in.ExpiresAt.IsZero() {
		return
	}
	if d := in.ExpiresAt.Sub(r.Deadline()); d > time.Second || d < -time.Second {
		ss.s.Arm(r, time.Until(in.ExpiresAt))
	}
}

// forget lets go of what this process holds of a record (its timer, data
// plane and handle); the sandbox is not touched.
func (ss *sharedStore) forget(r *Record) {
	r.stop()
	ss.s.release(r)
}

func (ss *sharedStore) get(id string) *Record {
	if id == "" {
		return nil
	}
	if r := ss.local.get(id); r != nil && !r.Shared {
		return r
	}
	in, ok := ss.find(id)
	if !ok {
		r := ss.local.get(id)
		if r == nil {
			return nil
		}
		if !r.Shared {
			// Added while the provider was asked, which never lists this
			// process's own records: it is live, not gone.
			return r
		}
		// Gone, or past its TTL: what this process still holds of it goes,
		// and an expired sandbox is deleted now rather than at the next
		// reap (deleting one another replica deleted is NotFound).
		ss.s.bg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), TeardownTimeout)
			defer cancel()
			_ = ss.s.Delete(ctx, id, "timeout")
		})
		return nil
	}
	return ss.open(in)
}

func (ss *sharedStore) byTokenOf(token string) *Record {
	if r := ss.local.byTokenOf(token); r != nil && !r.Shared {
		return r
	}
	sum := sha256.Sum256([]byte(token))
	in := ss.infos(map[string]string{tokenLabel: hex.EncodeToString(sum[:])})
	if len(in) != 1 {
		if r := ss.local.byTokenOf(token); r != nil && !r.Shared {
			return r // added while the provider was asked, as in get
		}
		return nil
	}
	return ss.open(in[0])
}

func (ss *sharedStore) take(id string) *Record {
	if r := ss.local.take(id); r != nil {
		return r
	}
	if ss.get(id) == nil {
		return nil
	}
	return ss.local.take(id)
}

// extended says whether the provider holds the sandbox past r's deadline
// (another replica extended its TTL), re-arming r's timer if so.
func (ss *sharedStore) extended(r *Record) bool {
	if !r.Shared {
		return false
	}
	in, ok := ss.find(r.ID)
	if !ok || in.ExpiresAt.IsZero() || time.Until(in.ExpiresAt) <= 0 {
		return false
	}
	ss.s.Arm(r, time.Until(in.ExpiresAt))
	return true
}

// localOnly are the records of this process that are not shared.
func (ss *sharedStore) localOnly() []*Record {
	var out []*Record
	for _, r := range ss.local.snapshot() {
		if !r.Shared {
			out = append(out, r)
		}
	}
	return out
}

// usage is what the key holds: its sandboxes the provider lists, its
// records of this process that are not shared, and its creates in flight
// here.
func (ss *sharedStore) usage(keyID string) usage {
	var u usage
	for _, in := range ss.infos(map[string]string{keyLabel: keyID}) {
		u = u.plus(parseResources(in.Labels[resourcesLabel]), 1)
	}
	for _, r := range ss.localOnly() {
		if r.KeyID == keyID {
			u = u.plus(r.Resources, 1)
		}
	}
	return u
}

func (ss *sharedStore) reserve(keyID string, res sandbox.Resources, maxN int, ceil sandbox.Resources) string {
	u := ss.usage(keyID)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return errClosed.Error()
	}
	p := ss.pending[keyID]
	if over := u.with(p).plus(res, 1).over(maxN, ceil); over != "" {
		return over
	}
	ss.pending[keyID] = p.plus(res, 1)
	return ""
}

// with is u and v together.
func (u usage) with(v usage) usage {
	u.n += v.n
	u.cpus += v.cpus
	u.memoryMB += v.memoryMB
	u.storageMB += v.storageMB
	u.pids += v.pids
	return u
}

func (ss *sharedStore) release(keyID string, res sandbox.Resources) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if p := ss.pending[keyID].plus(res, -1); p.n > 0 {
		ss.pending[keyID] = p
	} else {
		delete(ss.pending, keyID)
	}
}

// released: a record that was never added still holds its reservation;
// one that was is counted where it lives (the provider, or the local
// records), so letting it go frees nothing here.
func (ss *sharedStore) released(r *Record) {
	if !r.added {
		ss.release(r.KeyID, r.Resources)
	}
}

func (ss *sharedStore) add(r *Record) bool {
	ss.mu.Lock()
	closed := ss.closed
	ss.mu.Unlock()
	if closed || !ss.local.add(r) {
		return false
	}
	r.added = true
	if r.Shared {
		// The provider counts it from now on, and knows when it started.
		if in, ok := ss.find(r.ID); ok {
			r.StartedAt = in.CreatedAt
		}
	}
	ss.release(r.KeyID, r.Resources)
	return true
}

func (ss *sharedStore) soonestEnd(keyID string) time.Time {
	var soonest time.Time
	for _, r := range ss.snapshot() {
		if r.KeyID != keyID {
			continue
		}
		if end := r.Deadline(); !end.IsZero() && (soonest.IsZero() || end.Before(soonest)) {
			soonest = end
		}
	}
	return soonest
}

func (ss *sharedStore) snapshot() []*Record {
	infos := ss.infos(nil)
	out := make([]*Record, 0, len(infos))
	for _, in := range infos {
		out = append(out, ss.shallow(in))
	}
	out = append(out, ss.localOnly()...)
	sort.Slice(out, func(i, j int) bool {
		if !out[i].StartedAt.Equal(out[j].StartedAt) {
			return out[i].StartedAt.Before(out[j].StartedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

func (ss *sharedStore) closeAll() []string {
	ss.mu.Lock()
	ss.closed = true
	ss.mu.Unlock()
	return ss.local.closeAll()
}

func (ss *sharedStore) live() int { return len(ss.infos(nil)) + len(ss.localOnly()) }
