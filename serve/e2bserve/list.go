package e2bserve

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/serve/internal/core"
)

// List limits (as upstream: 100 a page by default and at most).
const (
	defaultListLimit = e2bapi.MaxPageLimit
	maxListLimit     = e2bapi.MaxPageLimit
)

// listQuery is a parsed GET /v2/sandboxes (or /sandboxes) query.
type listQuery struct {
	metadata     map[string]string
	running      bool // state includes running (or no state given)
	template     string
	startedAfter time.Time
	desc         bool
	limit        int
	after        *pageKey
}

type pageKey struct {
	started time.Time
	id      string
}

func (k pageKey) encode() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(k.started.UnixNano(), 10) + "." + k.id))
}

func decodePageKey(tok string) (*pageKey, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return nil, badQuery("nextToken is malformed")
	}
	ns, id, ok := strings.Cut(string(b), ".")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return nil, badQuery("nextToken is malformed")
	}
	return &pageKey{started: time.Unix(0, n), id: id}, nil
}

func parseListQuery(q url.Values) (listQuery, error) {
	lq := listQuery{limit: defaultListLimit, running: true}
	var err error
	if lq.metadata, err = core.ParseMetadata(q.Get(e2bapi.QueryMetadata)); err != nil {
		return lq, badQuery("%v", err)
	}
	if states := q[e2bapi.QueryState]; len(states) > 0 {
		lq.running = false
		for _, v := range states {
			for st := range strings.SplitSeq(v, ",") {
				switch strings.TrimSpace(st) {
				case e2bapi.StateRunning:
					lq.running = true
				case e2bapi.StatePaused, "":
				default:
					return lq, badQuery("state %q is not running or paused", st)
				}
			}
		}
	}
	if v := q.Get(e2bapi.QueryLimit); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return lq, badQuery("limit %q is not a positive number", v)
		}
		lq.limit = min(n, maxListLimit)
	}
	if v := q.Get(e2bapi.QueryNextToken); v != "" {
		if lq.after, err = decodePageKey(v); err != nil {
			return lq, err
		}
	}
	lq.template = q.Get("template")
	if v := q.Get("startedAfter"); v != "" {
		if lq.startedAfter, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return lq, badQuery("startedAfter %q is not an RFC 3339 time", v)
		}
	}
	switch q.Get("order") {
	case "", "asc":
	case "desc":
		lq.desc = true
	default:
		return lq, badQuery("order %q is not asc or desc", q.Get("order"))
	}
	return lq, nil
}

// before reports whether a comes before b in the listing order.
func (lq listQuery) before(a, b pageKey) bool {
	if !a.started.Equal(b.started) {
		return a.started.Before(b.started) != lq.desc
	}
	return (a.id < b.id) != lq.desc
}

// list answers GET /v2/sandboxes and GET /sandboxes: the key's sandboxes,
// filtered, a page at a time with X-Next-Token.
func (s *API) list(w http.ResponseWriter, r *http.Request, keyID string) {
	lq, err := parseListQuery(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	all := s.c.Snapshot() // ascending
	if lq.desc {
		for i, j := 0, len(all)-1; i < j; i, j = i+1, j-1 {
			all[i], all[j] = all[j], all[i]
		}
	}
	out := []e2bapi.ListedSandbox{}
	var last pageKey
	more := false
	for _, rec := range all {
		k := pageKey{started: rec.StartedAt, id: rec.ID}
		if rec.KeyID != keyID || !lq.running || (lq.after != nil && !lq.before(*lq.after, k)) {
			continue
		}
		if lq.template != "" && rec.TemplateID != lq.template {
			continue
		}
		if !lq.startedAfter.IsZero() && !rec.StartedAt.After(lq.startedAfter) {
			continue
		}
		if !matches(rec.Metadata, lq.metadata) {
			continue
		}
		if len(out) == lq.limit {
			more = true
			break
		}
		out = append(out, s.listedJSON(rec))
		last = k
	}
	if more {
		w.Header().Set(e2bapi.NextTokenHeader, last.encode())
	}
	writeJSON(w, http.StatusOK, out)
}

func matches(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

func badQuery(format string, args ...any) error {
	return fmt.Errorf("bad query: "+format, args...)
}
