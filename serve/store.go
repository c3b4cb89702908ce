package serve

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

// record is one sandbox the server handed out.
type record struct {
	id    string // the E2B sandbox ID
	keyID string // the API key that created it (apikeys.ID)
	token string // envd access token; a secret
	// trafficToken, when set, is needed on calls to the sandbox's own
	// ports (allowPublicTraffic false); a secret.
	trafficToken string
	templateID   string
	image        string
	metadata     map[string]string
	internet     bool
	startedAt    time.Time
	resources    sandbox.Resources // the sandbox's limits, held against its key's ceiling
	// shared: the record's state lives in its sandbox's labels and TTL
	// (a stateless server's E2B sandboxes), so another replica rebuilds it.
	shared bool
	// added: the record was added to its store (it then holds no
	// reservation of its own in a sharedStore).
	added bool
	// ownerOpensPorts: the owner's OpenSandbox key and the access token
	// open the ports too (the OpenSandbox API's sandboxes).
	ownerOpensPorts bool

	sb    *sandbox.Sandbox
	plane http.Handler // the envd data plane
	close io.Closer    // closes plane; nil for the proxy
	ports *dataplane.Ports

	mu    sync.Mutex
	endAt time.Time
	timer *time.Timer
	gen   int // bumped by every timer change, so a stale timer does nothing
}

func (r *record) tokenOK(presented string) bool {
	return subtle.ConstantTimeCompare([]byte(presented), []byte(r.token)) == 1
}

func (r *record) deadline() time.Time {
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
	released(r *record)
	// soonestEnd is when the key's first sandbox ends, for Retry-After.
	soonestEnd(keyID string) time.Time
	// add makes r findable; false when the store is closed.
	add(r *record) bool
	// take removes and returns the record, or nil when it is not there: of
	// concurrent takes exactly one gets it.
	take(id string) *record
	get(id string) *record
	byTokenOf(token string) *record
	// snapshot returns the live records by start time, then ID.
	snapshot() []*record
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
	byID    map[string]*record
	byToken map[[32]byte]*record // by SHA-256 of the token: no timing hint from map lookups
	perKey  map[string]usage
	closed  bool
}

func newStore() *store {
	return &store{byID: map[string]*record{}, byToken: map[[32]byte]*record{}, perKey: map[string]usage{}}
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

func (st *store) released(r *record) { st.release(r.keyID, r.resources) }

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
		if r.keyID != keyID {
			continue
		}
		if end := r.deadline(); soonest.IsZero() || end.Before(soonest) {
			soonest = end
		}
	}
	return soonest
}

// add makes r findable; false when the store is closed.
func (st *store) add(r *record) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return false
	}
	st.byID[r.id] = r
	st.byToken[sha256.Sum256([]byte(r.token))] = r
	return true
}

// take removes and returns the record, or nil when it is not there: of
// concurrent deletes exactly one gets it.
func (st *store) take(id string) *record {
	st.mu.Lock()
	defer st.mu.Unlock()
	r := st.byID[id]
	if r == nil {
		return nil
	}
	delete(st.byID, id)
	delete(st.byToken, sha256.Sum256([]byte(r.token)))
	return r
}

func (st *store) get(id string) *record {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.byID[id]
}

func (st *store) byTokenOf(token string) *record {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.byToken[sha256.Sum256([]byte(token))]
}

// snapshot returns the live records by start time, then ID.
func (st *store) snapshot() []*record {
	st.mu.Lock()
	out := make([]*record, 0, len(st.byID))
	for _, r := range st.byID {
		out = append(out, r)
	}
	st.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].startedAt.Equal(out[j].startedAt) {
			return out[i].startedAt.Before(out[j].startedAt)
		}
		return out[i].id < out[j].id
	})
	return out
}

// closeAll stops further adds and returns every live record's ID.
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
