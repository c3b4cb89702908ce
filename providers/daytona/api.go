package daytona

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth/providers/internal/rest"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
	"github.com/berth-sh/berth/sandbox/retry"
)

// Sandbox states, as the API spells them.
const (
	stateCreating    = "creating"
	stateStarted     = "started"
	stateStarting    = "starting"
	stateStopped     = "stopped"
	stateStopping    = "stopping"
	stateDestroying  = "destroying"
	stateDestroyed   = "destroyed"
	stateError       = "error"
	stateBuildFailed = "build_failed"
	stateArchived    = "archived"
	stateArchiving   = "archiving"
	statePaused      = "paused"
	statePausing     = "pausing"
	stateResuming    = "resuming"
	stateForking     = "forking"
)

// gone reports whether a sandbox in this state is, for berth, deleted.
func gone(state string) bool { return state == stateDestroying || state == stateDestroyed }

// failed reports whether the sandbox ended in a state it cannot start from.
func failed(state string) bool { return state == stateError || state == stateBuildFailed }

// sandboxDTO is the part of the API's Sandbox the driver reads.
type sandboxDTO struct {
	ID                 string            `json:"id"`
	Name               string            `json:"name"`
	Snapshot           string            `json:"snapshot"`
	User               string            `json:"user"`
	Env                map[string]string `json:"env"`
	Labels             map[string]string `json:"labels"`
	State              string            `json:"state"`
	ErrorReason        string            `json:"errorReason"`
	Disk               int               `json:"disk"`
	AutoStopInterval   *int              `json:"autoStopInterval"`
	AutoDeleteInterval *int              `json:"autoDeleteInterval"`
	AutoDestroyAt      string            `json:"autoDestroyAt"`
	CreatedAt          string            `json:"createdAt"`
	UpdatedAt          string            `json:"updatedAt"`
	LastActivityAt     string            `json:"lastActivityAt"`
	BuildInfo          *struct {
		DockerfileContent string `json:"dockerfileContent"`
	} `json:"buildInfo"`
}

// createRequest is the body of POST /sandbox.
type createRequest struct {
	Name               string            `json:"name,omitempty"`
	Snapshot           string            `json:"snapshot,omitempty"`
	BuildInfo          *buildInfo        `json:"buildInfo,omitempty"`
	User               string            `json:"user,omitempty"`
	Env                map[string]string `json:"env,omitempty"`
	Labels             map[string]string `json:"labels,omitempty"`
	NetworkBlockAll    bool              `json:"networkBlockAll"`
	NetworkAllowList   string            `json:"networkAllowList,omitempty"`
	DomainAllowList    string            `json:"domainAllowList,omitempty"`
	Target             string            `json:"target,omitempty"`
	CPU                int               `json:"cpu,omitempty"`
	Memory             int               `json:"memory,omitempty"`
	Disk               int               `json:"disk,omitempty"`
	AutoStopInterval   int               `json:"autoStopInterval"`
	AutoDeleteInterval int               `json:"autoDeleteInterval"`
	TTLMinutes         int               `json:"ttlMinutes,omitempty"`
}

type buildInfo struct {
	DockerfileContent string `json:"dockerfileContent"`
}

func (p *Provider) sandboxURL(id string, rest ...string) string {
	u := p.c.api("/sandbox/" + url.PathEscape(id))
	for _, r := range rest {
		u += "/" + r
	}
	return u
}

func (p *Provider) get(ctx context.Context, id string) (*sandboxDTO, error) {
	var sb sandboxDTO
	if err := p.c.do(ctx, rest.Call{Method: http.MethodGet, URL: p.sandboxURL(id)}, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// list reads every page of GET /sandbox. The API answers {items,
// nextCursor}; older servers answered a bare array.
func (p *Provider) list(ctx context.Context, labels map[string]string) ([]sandboxDTO, error) {
	q := url.Values{}
	if len(labels) > 0 {
		b, err := json.Marshal(labels)
		if err != nil {
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "daytona: labels: %w", err)
		}
		q.Set("labels", string(b))
	}
	var all []sandboxDTO
	for page := 0; page < maxListPages; page++ {
		var raw json.RawMessage
		if err := p.c.do(ctx, rest.Call{Method: http.MethodGet, URL: p.c.api("/sandbox"), Query: q}, &raw); err != nil {
			return nil, err
		}
		if len(raw) > 0 && raw[0] == '[' {
			var items []sandboxDTO
			if err := json.Unmarshal(raw, &items); err != nil {
				return nil, errdefs.Errorf(errdefs.Unavailable, "daytona API: GET /sandbox: decoding the list: %w", err)
			}
			return append(all, items...), nil
		}
		var pg struct {
			Items      []sandboxDTO `json:"items"`
			NextCursor *string      `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &pg); err != nil {
			return nil, errdefs.Errorf(errdefs.Unavailable, "daytona API: GET /sandbox: decoding the list: %w", err)
		}
		all = append(all, pg.Items...)
		if pg.NextCursor == nil || *pg.NextCursor == "" {
			return all, nil
		}
		q.Set("cursor", *pg.NextCursor)
	}
	return nil, errdefs.Errorf(errdefs.Unavailable, "daytona API: GET /sandbox: more than %d pages", maxListPages)
}

const maxListPages = 1000

// waitState polls the sandbox until ok says its state is reached, and
// returns it. A sandbox that disappears is NotFound.
func (p *Provider) waitState(ctx context.Context, id string, ok func(string) bool) (*sandboxDTO, error) {
	interval := p.opts.PollMin
	for {
		sb, err := p.get(ctx, id)
		if err != nil {
			return nil, err
		}
		if ok(sb.State) {
			return sb, nil
		}
		if err := retry.Sleep(ctx, interval); err != nil {
			return sb, fmt.Errorf("waiting for sandbox %s (state %s): %w", id, sb.State, err)
		}
		interval = min(interval*3/2, p.opts.PollMax)
	}
}

// deleteByID destroys a sandbox: GET first so that a sandbox already on
// its way out is NotFound, then DELETE; when the API refuses to destroy a
// sandbox in its current state (older servers refuse a running one, every
// server refuses one that is starting or stopping), it is stopped or left to
// settle, and the delete is tried again.
func (p *Provider) deleteByID(ctx context.Context, id string) error {
	sb, err := p.get(ctx, id)
	if err != nil {
		return err
	}
	if gone(sb.State) {
		return errdefs.Errorf(errdefs.NotFound, "daytona: sandbox %s is %s", id, sb.State)
	}
	for attempt := 0; ; attempt++ {
		err := p.c.do(ctx, rest.Call{Method: http.MethodDelete, URL: p.sandboxURL(id)}, nil)
		if err == nil || errors.Is(err, errdefs.ErrNotFound) || attempt >= 3 || !refusedForState(err) {
			return err
		}
		sb, gerr := p.get(ctx, id)
		if gerr != nil {
			return errors.Join(err, gerr)
		}
		switch {
		case gone(sb.State):
			return nil // someone else's delete won the race
		case sb.State == stateStarted:
			p.opts.Logger.Debug("daytona delete refused; stopping first", "id", id)
			if serr := p.c.do(ctx, rest.Call{Method: http.MethodPost, URL: p.sandboxURL(id, "stop")}, nil); serr != nil && !refusedForState(serr) {
				return errors.Join(err, serr)
			}
		}
		// A sandbox on its way to started (starting, forking, resuming)
		// is stopped on the next round.
		if _, werr := p.waitState(ctx, id, func(s string) bool { return settled(s) || s == stateStarted }); werr != nil {
			return errors.Join(err, werr)
		}
	}
}

// settled states accept a destroy.
func settled(s string) bool {
	switch s {
	case stateStopped, stateError, stateBuildFailed, stateArchived, statePaused, stateDestroyed, stateDestroying:
		return true
	}
	return false
}

// refusedForState reports a 400 or 409 answer: what the API answers a
// call the sandbox's current state does not allow ("Sandbox X is not in a
// valid state to be destroyed. State: starting"). The status decides, not
// the text; callers then read the state itself and act on that.
func refusedForState(err error) bool {
	st := rest.StatusOf(err)
	return st == http.StatusConflict || st == http.StatusBadRequest
}

// buildLogTail returns the last lines of a sandbox's image build log, for
// the error of a failed build. It returns "" when the log cannot be had.
func (p *Provider) buildLogTail(ctx context.Context, id string) string {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	resp, err := p.c.send(ctx, rest.Call{Method: http.MethodGet, URL: p.sandboxURL(id, "build-logs")})
	if err != nil {
		p.opts.Logger.Debug("daytona build log unavailable", "id", id, "error", err)
		return ""
	}
	defer resp.Body.Close()
	// Keep the last window of a possibly long log without holding all of it.
	const window = 64 << 10
	var buf []byte
	chunk := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if len(buf) > window {
			buf = buf[len(buf)-window:]
		}
		if rerr != nil {
			if rerr != io.EOF {
				p.opts.Logger.Debug("daytona build log cut short", "id", id, "error", rerr)
			}
			break
		}
	}
	return p.c.redact(tailLines(string(buf), buildLogLines, buildLogBytes))
}

// How much of a build log an error carries.
const (
	buildLogLines = 20
	buildLogBytes = 4000
)

// tailLines returns the last n lines of s, at most max bytes.
func tailLines(s string, n, max int) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := strings.Join(lines, "\n")
	if len(out) > max {
		out = "..." + out[len(out)-max:]
	}
	return out
}

// info turns a listed sandbox into the API's Info.
func info(sb sandboxDTO) driver.Info {
	in := driver.Info{ID: sb.ID, Image: sb.Snapshot, Labels: sb.Labels, State: sb.State}
	if img, ok := sb.Labels[ImageLabel]; ok {
		in.Image = img
		in.Labels = maps.Clone(sb.Labels)
		delete(in.Labels, ImageLabel)
	} else if sb.BuildInfo != nil {
		if img, ok := strings.CutPrefix(strings.TrimSpace(sb.BuildInfo.DockerfileContent), "FROM "); ok && !strings.Contains(img, "\n") {
			in.Image = strings.TrimSpace(img)
		}
	}
	in.CreatedAt = parseTime(sb.CreatedAt)
	if t := parseTime(sb.AutoDestroyAt); !t.IsZero() {
		in.ExpiresAt = t // the TTL's deadline
		return in
	}
	// Servers before the TTL: auto-stop, counted from the last activity.
	if sb.AutoStopInterval != nil && *sb.AutoStopInterval > 0 && sb.State == stateStarted {
		last := parseTime(sb.LastActivityAt)
		if last.IsZero() {
			last = parseTime(sb.UpdatedAt)
		}
		if !last.IsZero() {
			in.ExpiresAt = last.Add(time.Duration(*sb.AutoStopInterval) * time.Minute)
		}
	}
	return in
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

func itoa(n int) string { return strconv.Itoa(n) }
