package daytona

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/berth-sh/berth/providers/internal/rest"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

var _ driver.Endpointer = (*Sandbox)(nil)

// Defaults of the port options.
const (
	defaultPreviewTTL   = time.Hour
	defaultKeepActive   = 300 * time.Second
	maxPreviewTTL       = 24 * time.Hour // Daytona's maximum
	activityCallTimeout = 30 * time.Second
	previewExpiryMargin = 5 * time.Second // the clock between our call and Daytona's
)

// signedPreview is the answer of GET /sandbox/{id}/ports/{port}/signed-preview-url.
type signedPreview struct {
	SandboxID string `json:"sandboxId"`
	Port      int    `json:"port"`
	Token     string `json:"token"`
	URL       string `json:"url"`
}

// Endpoint is the port's signed preview URL, which carries its own
// credential (no header) until it expires (Options.PreviewTTL). Daytona's
// previews are HTTP(S) only: raw TCP would need its SSH access, which the
// driver does not use, so tcp is NotSupported. Preview traffic does not
// count as activity for auto-stop, so from the first Endpoint until Close
// the handle refreshes the sandbox's activity every Options.KeepActive.
func (s *Sandbox) Endpoint(ctx context.Context, port driver.Port) (driver.Endpoint, error) {
	ttl := s.p.opts.PreviewTTL
	asked := time.Now()
	var out signedPreview
	call := rest.Call{Method: http.MethodGet, URL: s.p.sandboxURL(s.id, "ports", strconv.Itoa(port.Number), "signed-preview-url"),
		Query: url.Values{"expiresInSeconds": {strconv.Itoa(int(ttl / time.Second))}}}
	if err := s.p.c.do(ctx, call, &out); err != nil {
		return driver.Endpoint{}, err
	}
	pu, err := url.Parse(out.URL)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		return driver.Endpoint{}, errdefs.Errorf(errdefs.Unavailable, "daytona: the signed preview URL of port %d is not an http(s) URL", port.Number)
	}
	s.keepActive()
	return driver.Endpoint{URL: out.URL, Expires: asked.Add(ttl - min(previewExpiryMargin, ttl/10)), Protocol: port.Protocol}, nil
}

// keepActive refreshes the activity now, the first time, and then every
// KeepActive until Close.
func (s *Sandbox) keepActive() {
	s.activeOnce.Do(func() {
		refresh := func() {
			if err := s.refreshActivity(); err != nil && s.life.Err() == nil {
				s.p.opts.Logger.Warn("daytona: refreshing the sandbox's activity failed", "id", s.id, "error", err)
			}
		}
		refresh()
		s.procs.Add(1)
		go func() {
			defer s.procs.Done()
			t := time.NewTicker(s.p.opts.KeepActive)
			defer t.Stop()
			for {
				select {
				case <-s.life.Done():
					return
				case <-t.C:
					refresh()
				}
			}
		}()
	})
}

// refreshActivity is the SDKs' refreshActivity: POST
// /sandbox/{id}/last-activity.
func (s *Sandbox) refreshActivity() error {
	ctx, cancel := context.WithTimeout(s.life, activityCallTimeout)
	defer cancel()
	return s.p.c.do(ctx, rest.Call{Method: http.MethodPost, URL: s.p.sandboxURL(s.id, "last-activity"), JSON: map[string]string{}}, nil)
}
