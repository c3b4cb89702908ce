package driver

import (
	"fmt"
	"github.com/berth-sh/berth/sandbox/errdefs"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// PortProtocol is what a sandbox's port speaks, as far as the way to it
// cares: HTTP goes through HTTP proxies (and includes WebSocket upgrades
// and long streams), TCP is raw bytes and needs a path that carries them.
type PortProtocol string

// Port protocols.
const (
	PortHTTP PortProtocol = "http" // HTTP/1.1, WebSocket included
	PortTCP  PortProtocol = "tcp"  // raw TCP
)

// Port is a TCP port of a sandbox and its protocol.
type Port struct {
	Number int
	// Protocol; "" means PortHTTP.
	Protocol PortProtocol
}

// ParsePort reads "8000", "8000/http" or "8000/tcp".
func ParsePort(s string) (Port, error) {
	num, proto, _ := strings.Cut(s, "/")
	n, err := strconv.Atoi(num)
	if err != nil {
		return Port{}, errdefs.Errorf(errdefs.InvalidArgument, "port %q is not NUMBER[/http|/tcp]", s)
	}
	p := Port{Number: n, Protocol: PortProtocol(proto)}.WithDefaults()
	return p, p.Validate()
}

// WithDefaults returns p with the default protocol filled in.
func (p Port) WithDefaults() Port {
	if p.Protocol == "" {
		p.Protocol = PortHTTP
	}
	return p
}

// Validate checks the number and protocol.
func (p Port) Validate() error {
	if p.Number < 1 || p.Number > 65535 {
		return errdefs.Errorf(errdefs.InvalidArgument, "port %d is not in 1-65535", p.Number)
	}
	switch p.Protocol {
	case "", PortHTTP, PortTCP:
		return nil
	}
	return errdefs.Errorf(errdefs.InvalidArgument, "port %d: protocol %q is not http or tcp", p.Number, p.Protocol)
}

// String is "8000/http".
func (p Port) String() string {
	return strconv.Itoa(p.Number) + "/" + string(p.WithDefaults().Protocol)
}

// validatePorts checks a Spec's ports: valid, each number once.
func validatePorts(ports []Port) error {
	seen := map[int]bool{}
	for _, p := range ports {
		if err := p.Validate(); err != nil {
			return errdefs.Errorf(errdefs.InvalidArgument, "spec: %w", err)
		}
		if seen[p.Number] {
			return errdefs.Errorf(errdefs.InvalidArgument, "spec: port %d is declared twice", p.Number)
		}
		seen[p.Number] = true
	}
	return nil
}

// DeclaredPort returns the port numbered n among ports, with defaults.
func DeclaredPort(ports []Port, n int) (Port, bool) {
	i := slices.IndexFunc(ports, func(p Port) bool { return p.Number == n })
	if i < 0 {
		return Port{}, false
	}
	return ports[i].WithDefaults(), true
}

// Endpoint is how a client on the launcher's side reaches a port of a
// sandbox (see driver.Endpointer).
type Endpoint struct {
	// URL is the base URL: http:// or https:// (it may carry a path
	// prefix: append request paths with Join) for PortHTTP, tcp://host:port
	// for PortTCP.
	URL string `json:"url"`
	// Headers go with every request (routing headers, a preview or
	// traffic token). They may be secrets: never log them.
	Headers map[string]string `json:"headers,omitempty"`
	// Expires is when the URL stops working (a signed preview URL); zero
	// means it works while the sandbox runs, or, when Local is set, while
	// the handle that made it is open.
	Expires time.Time `json:"expires,omitzero"`
	// Protocol is the port's protocol.
	Protocol PortProtocol `json:"protocol"`
	// Local: the URL is a listener of this process, on the loopback
	// interface, that carries connections over the provider's own
	// channel; it closes with the handle.
	Local bool `json:"local,omitempty"`
}

// Join returns the URL of path (which may hold a query) under the
// endpoint's base URL.
func (e Endpoint) Join(path string) string {
	if path == "" {
		return e.URL
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	return strings.TrimRight(e.URL, "/") + path
}

// WebSocketURL is Join(path) with ws:// or wss:// in place of http(s)://.
func (e Endpoint) WebSocketURL(path string) string {
	u := e.Join(path)
	if rest, ok := strings.CutPrefix(u, "https://"); ok {
		return "wss://" + rest
	}
	if rest, ok := strings.CutPrefix(u, "http://"); ok {
		return "ws://" + rest
	}
	return u
}

// Addr returns host:port of a tcp:// endpoint (or of an http one: the
// address to dial).
func (e Endpoint) Addr() (string, error) {
	u, err := url.Parse(e.URL)
	if err != nil || u.Host == "" {
		return "", errdefs.Errorf(errdefs.InvalidArgument, "endpoint URL %q has no host", e.URL)
	}
	if u.Port() != "" {
		return u.Host, nil
	}
	switch u.Scheme {
	case "https", "wss":
		return net.JoinHostPort(u.Hostname(), "443"), nil
	case "http", "ws":
		return net.JoinHostPort(u.Hostname(), "80"), nil
	}
	return "", errdefs.Errorf(errdefs.InvalidArgument, "endpoint URL %q has no port", e.URL)
}

// SetHeaders adds the endpoint's headers to h.
func (e Endpoint) SetHeaders(h http.Header) {
	for k, v := range e.Headers {
		h.Set(k, v)
	}
}

// String shows the endpoint without header values, which may be secrets.
func (e Endpoint) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s", e.URL, e.Protocol)
	for _, k := range slices.Sorted(maps.Keys(e.Headers)) {
		fmt.Fprintf(&b, ", header %s", k)
	}
	if !e.Expires.IsZero() {
		fmt.Fprintf(&b, ", expires %s", e.Expires.UTC().Format(time.RFC3339))
	}
	if e.Local {
		b.WriteString(", local")
	}
	b.WriteString(")")
	return b.String()
}
