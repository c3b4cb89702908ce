package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/berth-sh/berth/sandbox/errdefs"
	"github.com/berth-sh/berth/session/samples"
)

// Client drives a session server's control routes: what a rollout driver
// does around an agent run (create, hand the agent SessionURL, collect
// samples, delete).
type Client struct {
	// BaseURL is the server's address, e.g. http://127.0.0.1:30000.
	BaseURL string
	// APIKey, when the server requires one.
	APIKey string
	// HTTP defaults to http.DefaultClient.
	HTTP *http.Client
}

// MaxReplyBytes bounds a control reply read by the client.
const MaxReplyBytes = 1 << 30

// SessionURL is the base URL an OpenAI (or Anthropic) client of the
// session uses: requests to {SessionURL}/v1/chat/completions are recorded.
func (c *Client) SessionURL(id string) string {
	return strings.TrimRight(c.BaseURL, "/") + "/sessions/" + id
}

// PolicyBaseURL is SessionURL with /v1: the OpenAI base URL a harness
// that appends only /chat/completions (NeMo Gym's policy_base_url, used
// verbatim) is given.
func (c *Client) PolicyBaseURL(id string) string { return c.SessionURL(id) + "/v1" }

func (c *Client) do(ctx context.Context, method, path string, body []byte, accept string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, errdefs.Errorf(errdefs.Unavailable, "session server: %v", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxReplyBytes))
	if err != nil {
		return nil, errdefs.Errorf(errdefs.Unavailable, "session server: %v", err)
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		// The class comes from the one HTTP mapping of sandbox/errdefs.
		return nil, errdefs.HTTPError(resp.StatusCode, resp.Header, fmt.Errorf("session server: %s %s: %d: %s", method, path, resp.StatusCode, msg))
	}
	return data, nil
}

// Create opens a session and returns its id.
func (c *Client) Create(ctx context.Context) (string, error) {
	data, err := c.do(ctx, http.MethodPost, "/sessions", nil, "")
	if err != nil {
		return "", err
	}
	var r struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal(data, &r); err != nil || r.SessionID == "" {
		return "", fmt.Errorf("session server: bad create reply")
	}
	return r.SessionID, nil
}

// Get returns a session's records and metadata.
func (c *Client) Get(ctx context.Context, id string) (*Info, error) {
	data, err := c.do(ctx, http.MethodGet, "/sessions/"+id, nil, "")
	if err != nil {
		return nil, err
	}
	var info Info
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("session server: bad session reply: %w", err)
	}
	return &info, nil
}

// Samples collects a session's samples (the safetensors payload); a
// maxSeqLen of 0 means no limit.
func (c *Client) Samples(ctx context.Context, id string, maxSeqLen int) (*samples.Payload, error) {
	body := []byte("{}")
	if maxSeqLen > 0 {
		body = []byte(fmt.Sprintf(`{"max_seq_len":%d}`, maxSeqLen))
	}
	data, err := c.do(ctx, http.MethodPost, "/sessions/"+id+"/samples", body, "application/octet-stream")
	if err != nil {
		return nil, err
	}
	return samples.DecodeSafetensors(data)
}

// Delete closes a session.
func (c *Client) Delete(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, "/sessions/"+id, nil, "")
	return err
}
