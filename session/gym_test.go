package session

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/apikeys"
	"github.com/berth-sh/berth/session/testengine"
)

// TestPolicyBaseURLForGym: a server bound on one address and known to
// other hosts by another (ExternalURL) hands out, on POST /sessions, the
// base_url a NeMo Gym agent uses verbatim as policy_base_url; Gym's call,
// POST {policy_base_url}/chat/completions with a Bearer key, is a recorded
// turn, and without the key it is refused.
func TestPolicyBaseURLForGym(t *testing.T) {
	const key = "berth_gym0123456789abcdef0123"
	const external = "http://trainer-0.example:30000/"
	keys, _ := apikeys.New(key)
	// A mini-swe-agent style answer: a thought and one bash block.
	answer := "THOUGHT: run the tests.\n\n```bash\npytest -q\n```"
	script := func(testengine.Call) testengine.Reply { return testengine.Reply{Text: answer} }
	e := newEnv(t, script, testengine.Options{}, func(o *Options) {
		o.Keys, o.ExternalURL = keys, external
	})
	// The Gym host resolves trainer-0.example to the server.
	bound := strings.TrimPrefix(e.url, "http://")
	gymHost := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, bound)
	}}}
	post := func(u, auth string, body any) (*http.Response, []byte) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", u, strings.NewReader(string(b)))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		res, err := gymHost.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		out, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res, out
	}
	res, body := post(strings.TrimSuffix(external, "/")+"/sessions", key, map[string]any{})
	var created struct {
		SessionID string `json:"session_id"`
		BaseURL   string `json:"base_url"`
	}
	if res.StatusCode != http.StatusOK || json.Unmarshal(body, &created) != nil {
		t.Fatalf("create: %d %s", res.StatusCode, body)
	}
	want := "http://trainer-0.example:30000/sessions/" + created.SessionID + "/v1"
	if created.BaseURL != want {
		t.Fatalf("base_url %q, want %q", created.BaseURL, want)
	}
	if c := (&Client{BaseURL: "http://trainer-0.example:30000"}); c.PolicyBaseURL(created.SessionID) != want {
		t.Fatalf("Client.PolicyBaseURL %q", c.PolicyBaseURL(created.SessionID))
	}
	chat := map[string]any{"model": "policy", "messages": []any{map[string]any{"role": "user", "content": "fix the bug"}}}
	if res, body := post(created.BaseURL+"/chat/completions", "", chat); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no key: %d %s", res.StatusCode, body)
	}
	res, body = post(created.BaseURL+"/chat/completions", key, chat)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("chat: %d %s", res.StatusCode, body)
	}
	var reply struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if json.Unmarshal(body, &reply) != nil || len(reply.Choices) != 1 || reply.Choices[0].Message.Content != answer {
		t.Fatalf("chat reply %s", body)
	}
	e.client.APIKey = key
	info, err := e.client.Get(t.Context(), created.SessionID)
	if err != nil || len(info.Records) != 1 || len(info.Metadata.AccumulatedTokenIDs) == 0 {
		t.Fatalf("session after Gym's turn: %+v %v", info, err)
	}
	for _, bad := range []string{"ftp://x", "http://", "http://h/?q=1", "http://u:p@h"} {
		if _, err := ExternalURL(bad); err == nil {
			t.Errorf("external URL %q accepted", bad)
		}
	}
	if u, err := url.Parse(created.BaseURL); err != nil || u.Host != "trainer-0.example:30000" {
		t.Fatalf("base_url host: %v %v", u, err)
	}
}
