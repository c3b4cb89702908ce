package pid1

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// ControlPath is the agent's own endpoint on the socket: GET returns the
// deadline, PUT moves it. Its name cannot clash with envd's routes, which
// all start with a Connect service name ("/process.Process/...") or
// "/files". When Options.Token is set, every call needs it as
// TokenHeader, as envd's calls do: where a sandbox's process can reach the
// socket (under runsc its directory is mounted in the sandbox), it still
// cannot move the deadline.
const ControlPath = "/berth.agent/deadline"

// TokenHeader carries the token on ControlPath (envd's access token
// header).
const TokenHeader = "X-Access-Token"

// deadlineMsg is the JSON body of ControlPath; an empty Deadline is none.
type deadlineMsg struct {
	Deadline string `json:"deadline"`
}

var _ http.Handler = (*deadline)(nil)

// deadline is a movable point in time that closes a channel when reached.
type deadline struct {
	token string // "" takes every call

	mu    sync.Mutex
	t     time.Time
	timer *time.Timer
	done  chan struct{}
	fired bool
}

func newDeadline(t time.Time, token string) *deadline {
	d := &deadline{done: make(chan struct{}), token: token}
	d.set(t)
	return d
}

func (d *deadline) expired() <-chan struct{} { return d.done }

func (d *deadline) get() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.t
}

// set moves the deadline; zero means none. Once reached it stays reached.
func (d *deadline) set(t time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fired {
		return false
	}
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	d.t = t
	if t.IsZero() {
		return true
	}
	d.timer = time.AfterFunc(time.Until(t), d.fire)
	return true
}

// stop releases the timer; the deadline no longer fires.
func (d *deadline) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
}

func (d *deadline) fire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fired || d.t.IsZero() || time.Now().Before(d.t) {
		return // moved since this timer was set
	}
	d.fired = true
	close(d.done)
}

func (d *deadline) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if d.token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get(TokenHeader)), []byte(d.token)) != 1 {
		http.Error(w, "missing or invalid access token", http.StatusUnauthorized)
		return
	}
	switch r.Method {
	case http.MethodGet:
	case http.MethodPut:
		var m deadlineMsg
		if err := json.NewDecoder(io.LimitReader(r.Body, 1024)).Decode(&m); err != nil {
			http.Error(w, "bad deadline body: "+err.Error(), http.StatusBadRequest)
			return
		}
		var t time.Time
		if m.Deadline != "" {
			var err error
			if t, err = time.Parse(time.RFC3339Nano, m.Deadline); err != nil {
				http.Error(w, "bad deadline: "+err.Error(), http.StatusBadRequest)
				return
			}
		}
		if !d.set(t) {
			http.Error(w, "deadline already reached", http.StatusConflict)
			return
		}
	default:
		w.Header().Set("Allow", "GET, PUT")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(deadlineMsg{Deadline: formatTime(d.get())})
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// SetDeadline moves the deadline of the agent listening on socket, with its
// token ("" for an agent started without one); zero means none. It fails
// once the deadline has been reached.
func SetDeadline(ctx context.Context, socket, token string, t time.Time) error {
	body, _ := json.Marshal(deadlineMsg{Deadline: formatTime(t)})
	_, err := control(ctx, socket, token, http.MethodPut, body)
	return err
}

// GetDeadline returns the deadline of the agent listening on socket.
func GetDeadline(ctx context.Context, socket, token string) (time.Time, error) {
	m, err := control(ctx, socket, token, http.MethodGet, nil)
	if err != nil || m.Deadline == "" {
		return time.Time{}, err
	}
	return time.Parse(time.RFC3339Nano, m.Deadline)
}

func control(ctx context.Context, socket, token, method string, body []byte) (deadlineMsg, error) {
	var m deadlineMsg
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, method, "http://agent"+ControlPath, bytes.NewReader(body))
	if err != nil {
		return m, err
	}
	if token != "" {
		req.Header.Set(TokenHeader, token)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return m, fmt.Errorf("agent deadline: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return m, fmt.Errorf("agent deadline: %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("agent deadline: %w", err)
	}
	return m, nil
}
