package gymtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth/serve/opensandbox"
)

// osbClient makes the OpenSandbox calls Gym's opensandbox provider makes
// (server-proxy mode): create, wait for Running, the execd endpoint, the
// readiness ping, foreground commands, delete.
type osbClient struct {
	base string // the server's base URL, e.g. http://127.0.0.1:3000
	key  string
	hc   *http.Client
}

func (c *osbClient) do(ctx context.Context, method, url string, hdr map[string]string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set(opensandbox.APIKeyHeader, c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return c.hc.Do(req)
}

// call makes a request and reads a reply of the given status into v
// (when not nil).
func (c *osbClient) call(ctx context.Context, method, url string, hdr map[string]string, body any, status int, v any) error {
	res, err := c.do(ctx, method, url, hdr, body)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return err
	}
	if res.StatusCode != status {
		return fmt.Errorf("%s %s: %d, want %d: %s", res.Request.Method, res.Request.URL.Path, res.StatusCode, status, b)
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(b, v)
}

// sandbox is a created sandbox and where its execd answers.
type sandbox struct {
	id    string
	execd string
	hdr   map[string]string
}

func (c *osbClient) create(ctx context.Context, image string, ttl time.Duration, metadata map[string]string) (*sandbox, error) {
	var created opensandbox.Sandbox
	err := c.call(ctx, "POST", c.base+"/v1/sandboxes", nil, map[string]any{
		"image":          map[string]string{"uri": image},
		"entrypoint":     []string{"tail", "-f", "/dev/null"},
		"timeout":        int(ttl / time.Second),
		"resourceLimits": map[string]string{"cpu": "1", "memory": "512Mi"},
		"metadata":       metadata,
	}, http.StatusAccepted, &created)
	if err != nil {
		return nil, err
	}
	sb := &sandbox{id: created.ID}
	for state := created.Status.State; state != opensandbox.StateRunning; {
		if state == opensandbox.StateFailed {
			c.delete(context.WithoutCancel(ctx), sb.id)
			return nil, fmt.Errorf("sandbox %s failed to start", sb.id)
		}
		time.Sleep(200 * time.Millisecond)
		var got opensandbox.Sandbox
		if err := c.call(ctx, "GET", c.base+"/v1/sandboxes/"+sb.id, nil, nil, http.StatusOK, &got); err != nil {
			return nil, err
		}
		state = got.Status.State
	}
	var ep opensandbox.Endpoint
	if err := c.call(ctx, "GET", c.base+"/v1/sandboxes/"+sb.id+"/endpoints/"+strconv.Itoa(opensandbox.ExecdPort)+"?use_server_proxy=true", nil, nil, http.StatusOK, &ep); err != nil {
		return nil, err
	}
	scheme, _, _ := strings.Cut(c.base, "://")
	sb.execd, sb.hdr = scheme+"://"+ep.Endpoint, ep.Headers
	if err := c.call(ctx, "GET", sb.execd+"/ping", sb.hdr, nil, http.StatusOK, nil); err != nil {
		return nil, err
	}
	return sb, nil
}

func (c *osbClient) delete(ctx context.Context, id string) error {
	return c.call(ctx, "DELETE", c.base+"/v1/sandboxes/"+id, nil, nil, http.StatusNoContent, nil)
}

// run runs command in the foreground and returns its output (the line
// events joined by newlines, as Gym's provider joins them) and exit code.
func (c *osbClient) run(ctx context.Context, sb *sandbox, command string, timeout time.Duration) (string, int, error) {
	res, err := c.do(ctx, "POST", sb.execd+"/command", sb.hdr, map[string]any{"command": command, "timeout": timeout.Milliseconds()})
	if err != nil {
		return "", 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		return "", 0, fmt.Errorf("command: %d: %s", res.StatusCode, b)
	}
	var out []string
	code := -1
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var ev opensandbox.StreamEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			return "", 0, fmt.Errorf("command stream: %q: %w", line, err)
		}
		switch ev.Type {
		case opensandbox.EventStdout, opensandbox.EventStderr:
			out = append(out, ev.Text)
		case opensandbox.EventComplete:
			code = 0
		case opensandbox.EventErr:
			if n, err := strconv.Atoi(ev.Error.EValue); err == nil {
				code = n
			} else {
				return "", 0, fmt.Errorf("command failed: %s", ev.Error.EValue)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", 0, err
	}
	if code == -1 {
		return "", 0, fmt.Errorf("command stream ended without an exit")
	}
	return strings.Join(out, "\n"), code, nil
}
