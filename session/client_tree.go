package session

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/berth-sh/berth/sandbox/errdefs"
	"github.com/berth-sh/berth/session/samples"
)

// CreateTree opens a v2 tree session (one that can fork) and returns its
// id. A server that does not know versions answers with a linear session:
// that is an error here.
func (c *Client) CreateTree(ctx context.Context) (string, error) {
	data, err := c.do(ctx, http.MethodPost, "/sessions", []byte(`{"version":"v2"}`), "")
	if err != nil {
		return "", err
	}
	var r struct {
		SessionID string `json:"session_id"`
		Version   string `json:"version"`
	}
	if err := json.Unmarshal(data, &r); err != nil || r.SessionID == "" {
		return "", fmt.Errorf("session server: bad create reply")
	}
	if r.Version != "v2" {
		_ = c.Delete(context.WithoutCancel(ctx), r.SessionID)
		return "", errdefs.Errorf(errdefs.NotSupported, "session server: it made a linear session: it has no tree sessions")
	}
	return r.SessionID, nil
}

// Fork makes a branch of a tree session that keeps the first turn turns
// of the session's current path (0: none) and returns the branch's
// session id: an agent pointed at SessionURL(branch) continues from there,
// the path's token ids shared, not copied. The branch is a session of its
// own (delete it when done); the tree lives while any of its sessions
// does.
func (c *Client) Fork(ctx context.Context, id string, turn int) (string, error) {
	data, err := c.do(ctx, http.MethodPost, "/sessions/"+id+"/fork", []byte(fmt.Sprintf(`{"turn":%d}`, turn)), "")
	if err != nil {
		return "", err
	}
	var r struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal(data, &r); err != nil || r.SessionID == "" {
		return "", fmt.Errorf("session server: bad fork reply")
	}
	return r.SessionID, nil
}

// LeafRequest is what TreeSamples asks for.
type LeafRequest struct {
	// MaxSeqLen, when above 0, cuts each leaf's turns at max_seq_len.
	MaxSeqLen int
	// Metadata is the agent's, for every leaf (its "reward" becomes each
	// sample's reward).
	Metadata map[string]any
	// Branches adds metadata to the leaves of one branch, by its session
	// id (the branch's reward).
	Branches map[string]map[string]any
}

// TreeSamples collects a tree session's samples: one per leaf of the
// whole tree, whichever of its sessions id is, each with its metadata's
// "leaf" (node_id, path_node_ids, response_id, branch), its full ids and
// its reward. Collect once, when every branch is done: which leaf trains
// a shared turn is decided over the leaves there are.
func (c *Client) TreeSamples(ctx context.Context, id string, req LeafRequest) (*samples.Payload, error) {
	body := map[string]any{}
	if req.MaxSeqLen > 0 {
		body["max_seq_len"] = req.MaxSeqLen
	}
	if req.Metadata != nil {
		body["metadata"] = req.Metadata
	}
	if req.Branches != nil {
		body["branches"] = req.Branches
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	data, err := c.do(ctx, http.MethodPost, "/sessions/"+id+"/samples", b, "application/octet-stream")
	if err != nil {
		return nil, err
	}
	return samples.DecodeSafetensors(data)
}

// LeafOf is a tree sample's leaf descriptor (false when it has none).
func LeafOf(s samples.Sample) (samples.Leaf, bool) {
	raw, err := json.Marshal(s.Metadata["leaf"])
	var l samples.Leaf
	if err != nil || s.Metadata["leaf"] == nil || json.Unmarshal(raw, &l) != nil {
		return samples.Leaf{}, false
	}
	return l, true
}

// Abort aborts a session: its in-flight turns stop (nothing of them is
// recorded), later turns are refused, its samples are ABORTED with the
// reason. Aborting twice keeps the first reason.
func (c *Client) Abort(ctx context.Context, id, reason string) error {
	b, _ := json.Marshal(map[string]string{"reason": reason})
	_, err := c.do(ctx, http.MethodPost, "/sessions/"+id+"/abort", b, "")
	return err
}

// AbortAll aborts every session of the server (what a trainer's abort
// hook calls) and returns how many it aborted.
func (c *Client) AbortAll(ctx context.Context, reason string) (int, error) {
	b, _ := json.Marshal(map[string]string{"reason": reason})
	data, err := c.do(ctx, http.MethodPost, "/abort", b, "")
	if err != nil {
		return 0, err
	}
	var r struct {
		Aborted int `json:"aborted"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return 0, fmt.Errorf("session server: bad abort reply: %w", err)
	}
	return r.Aborted, nil
}

// Aborted reports whether the session is aborted, and why.
func (c *Client) Aborted(ctx context.Context, id string) (string, bool, error) {
	return c.abortState(ctx, id, 0)
}

func (c *Client) abortState(ctx context.Context, id string, wait time.Duration) (string, bool, error) {
	path := "/sessions/" + id + "/abort"
	if wait > 0 {
		path += "?wait=" + strconv.Itoa(int(wait/time.Second))
	}
	data, err := c.do(ctx, http.MethodGet, path, nil, "")
	if err != nil {
		return "", false, err
	}
	var r struct {
		Aborted bool   `json:"aborted"`
		Reason  string `json:"reason"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return "", false, fmt.Errorf("session server: bad abort reply: %w", err)
	}
	return r.Reason, r.Aborted, nil
}

// WaitAbort waits until the session is aborted and returns the reason. It
// returns ctx's error when ctx ends first, and the server's (NotFound once
// the session is deleted) when asking fails; a failed ask is tried again
// after a second while the error is transient.
func (c *Client) WaitAbort(ctx context.Context, id string) (string, error) {
	for {
		reason, aborted, err := c.abortState(ctx, id, MaxAbortWait)
		switch {
		case ctx.Err() != nil:
			return "", ctx.Err()
		case aborted:
			return reason, nil
		case err != nil && !errdefs.Retryable(err):
			return "", err
		case err != nil:
			t := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
				t.Stop()
				return "", ctx.Err()
			case <-t.C:
			}
		}
	}
}
