package core

import (
	"crypto/sha256"
	"crypto/subtle"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/serve/dataplane"
)

// Record is one sandbox the server handed out, through either API. The
// API that makes it fills the fields, then the server owns it: Arm sets
// its end, Add makes it findable, Delete ends it.
type Record struct {
	ID    string // the API's sandbox ID
	KeyID string // the API key that created it (apikeys.ID)
	Token string // the envd (and execd) access token; a secret
	// TrafficToken, when set, is needed on calls to the sandbox's own
	// ports (allowPublicTraffic false); a secret.
	TrafficToken string
	TemplateID   string
	Image        string
	Metadata     map[string]string
	Internet     bool
	StartedAt    time.Time
	Resources    sandbox.Resources // the sandbox's limits, held against its key's ceiling
	// Shared: the record's state lives in its sandbox's labels and TTL
	// (a stateless server's E2B sandboxes), so another replica rebuilds it.
	Shared bool
	// PortCredentials, when set, open the sandbox's private ports besides
	// its traffic token (the OpenSandbox API's sandboxes).
	PortCredentials *PortCredentials

	Sandbox *sandbox.Sandbox
	Plane   http.Handler // the envd data plane
	Closer  io.Closer    // closes what the APIs attached; nil for the proxy
	Ports   *dataplane.Ports

	// added: the record was added to its store (it then holds no
	// reservation of its own in a sharedStore).
	added bool

	mu    sync.Mutex
	endAt time.Time
	timer *time.Timer
	gen   int // bumped by every timer change, so a stale timer does nothing
}

// TokenOK reports whether presented is the record's access token.
func (r *Record) TokenOK(presented string) bool {
	return subtle.ConstantTimeCompare([]byte(presented), []byte(r.Token)) == 1
}

// Deadline is when the server ends the sandbox.
func (r *Record) Deadline() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.endAt
}

// sandboxStore holds the records a server serves: in its memory (store), or
// in its provider's objects (sharedStore, the stateless server's).
type sandboxStore interface {
	// reserve takes a slot and res for the key, or says which of its
	// limits (at most maxN sandboxes, their resources under ceil) it would
	// pass; release gives back a reservation no record took.
	reserve(keyID string, res sandbox.Resources, maxN int, ceil sandbox.Resources) (over string)
	release(keyID string, res sandbox.Resources)
	// released is told that the server let a record go: taken, or never
	// added.
	released(r *Record)
	// soonestEnd is when the key's first sandbox ends, for Retry-After.
	soonestEnd(keyID string) time.Time
	// add makes r findable; false when the store is closed.
	add(r *Record) bool
	// take removes and returns the record, or nil when it is not there: of
	// concurrent takes exactly one gets it.
	take(id string) *Record
	get(id string) *Record
	byTokenOf(token string) *Record
	// snapshot returns the live records by start time, then ID.
	snapshot() []*Record
	// closeAll stops further adds and returns the IDs of the records this
	// process holds.
	closeAll() []string
	// live counts the live sandboxes.
	live() int
}

var _ sandboxStore = (*store)(nil)

// store indexes the live records in memory and counts each key's
// sandboxes, live and being created.
type store struct {
	mu      sync.Mutex
	byID    map[string]*Record
	byToken map[[32]byte]*Record // by SHA-256 of the token: no timing hint from map lookups
	perKey  map[string]usage
	closed  bool
}

func newStore() *store {
	return &store{byID: map[string]*Record{}, byToken: map[[32]byte]*Record{}, perKey: map[string]usage{}}
}

// reserve takes a slot and res for the key, or says which of its limits
// (at most maxN sandboxes, their resources under ceil) it would pass.
func (st *store) reserve(keyID string, res sandbox.Resources, maxN int, ceil sandbox.Resources) (over string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return "the server is shutting down"
	}
	u := st.perKey[keyID].plus(res, 1)
	if over := u.over(maxN, ceil); over != "" {
		return over
	}
	st.perKey[keyID] = u
	return ""
}

func (st *store) released(r *Record) { st.release(r.KeyID, r.Resources) }

func (st *store) release(keyID string, res sandbox.Resources) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if u := st.perKey[keyID].plus(res, -1); u.n > 0 {
		st.perKey[keyID] = u
	} else {
		delete(st.perKey, keyID)
	}
}

// soonestEnd is when the key's first sandbox ends, for Retry-After.
func (st *store) soonestEnd(keyID string) time.Time {
	var soonest time.Time
	for _, r := range st.snapshot() {
		if r.KeyID != keyID {
			continue
		}
		if end := r.Deadline(); soonest.IsZero() || end.Before(soonest) {
			soonest = end
		}
	}
	return soonest
}

// add makes r findable; false when the store is closed.
func (st *store) add(r *Record) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return false
	}
	st.byID[r.ID] = r
	st.byToken[sha256.Sum256([]byte(r.Token))] = r
	return true
}

// take removes and returns the record, or nil when it is not there: of
// concurrent deletes exactly one gets it.
func (st *store) take(id string) *Record {
	st.mu.Lock()
	defer st.mu.Unlock()
	r := st.byID[id]
	if r == nil {
		return nil
	}
	delete(st.byID, id)
	delete(st.byToken, sha256.Sum256([]byte(r.Token)))
	return r
}

func (st *store) get(id string) *Record {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.byID[id]
}

func (st *store) byTokenOf(token string) *Record {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.byToken[sha256.Sum256([]byte(token))]
}

// snapshot returns the live records by start time, then ID.
func (st *store) snapshot() []*Record {
	st.mu.Lock()
	out := make([]*Record, 0, len(st.byID))
	for _, r := range st.byID {
		out = append(out, r)
	}
	st.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].StartedAt.Equal(out[j].StartedAt) {
			return out[i].StartedAt.Before(out[j].StartedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// closeAll stops further adds and returns every live Record's ID.
func (st *store) closeAll() []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	ids := make([]string, 0, len(st.byID))
	for id := range st.byID {
		ids = append(ids, id)
	}
	return ids
}

func (st *store) live() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.byID)
}
