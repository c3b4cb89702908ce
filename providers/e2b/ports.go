package e2b

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

var _ driver.Endpointer = (*sandboxHandle)(nil)

// headerTrafficToken carries a sandbox's traffic access token to its
// ports (E2B's edge refuses them without it, 403, when the sandbox was
// created with network.allowPublicTraffic false, as the driver creates
// them); lower case, as the SDKs write it.
var headerTrafficToken = strings.ToLower(e2bapi.TrafficAccessTokenHeader)

// Endpoint is E2B's URL of the port, https://<port>-<id>.<domain>, or,
// behind E2B_SANDBOX_URL (a self-hosted server such as berth serve), that
// URL with the routing headers; with the traffic access token when the
// sandbox has one. A handle made by Connect learns the token from the
// connect call, asked for with the sandbox's remaining life (it moves no
// deadline). E2B serves HTTP and WebSocket on ports; raw TCP is not
// offered. The creator's handle re-arms the TTL while it is open
// (keepAlive), so an endpoint in use outlives no sandbox.
func (h *sandboxHandle) Endpoint(ctx context.Context, port driver.Port) (driver.Endpoint, error) {
	token, err := h.trafficToken(ctx)
	if err != nil {
		return driver.Endpoint{}, err
	}
	ep := driver.Endpoint{Protocol: port.Protocol, Headers: map[string]string{}}
	if base := h.p.opts.SandboxURL; base != "" {
		ep.URL = base
		ep.Headers[e2bapi.SandboxIDHeader] = h.id
		ep.Headers[e2bapi.SandboxPortHeader] = strconv.Itoa(port.Number)
	} else {
		ep.URL = "https://" + strconv.Itoa(port.Number) + "-" + h.id + "." + h.domain
	}
	if token != "" {
		ep.Headers[headerTrafficToken] = token
	}
	if len(ep.Headers) == 0 {
		ep.Headers = nil
	}
	if _, err := url.Parse(ep.URL); err != nil {
		return driver.Endpoint{}, errdefs.Errorf(errdefs.InvalidArgument, "e2b: endpoint URL: %w", err)
	}
	return ep, nil
}

// trafficToken returns the sandbox's traffic access token ("" when it has
// none), asking the control plane once when the handle does not know.
func (h *sandboxHandle) trafficToken(ctx context.Context) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.traffic.known {
		return h.traffic.token, nil
	}
	life := time.Until(h.traffic.endAt)
	if h.traffic.endAt.IsZero() || life <= 0 {
		life = resumeTTL
	}
	c, err := h.p.api.connect(ctx, h.id, seconds(life))
	if err != nil {
		return "", h.scrub(err)
	}
	h.setTraffic(deref(c.TrafficAccessToken))
	return h.traffic.token, nil
}

// setTraffic records the traffic token; h.mu is held or h is new.
func (h *sandboxHandle) setTraffic(token string) {
	h.traffic.token, h.traffic.known = token, true
	h.trafficSecret.Store(token)
}
