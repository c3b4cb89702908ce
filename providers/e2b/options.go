package e2b

import (
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Defaults of Options.
const (
	DefaultDomain       = e2bapi.DefaultDomain
	DefaultMaxRetries   = 3
	DefaultMaxRetryWait = 30 * time.Second
)

// Secret is a credential that prints as a placeholder (registry.Secret);
// the driver reveals it for the X-API-KEY header alone.
type Secret interface {
	Reveal() string
}

// Options configure the driver. The registry fills them from E2B_API_KEY,
// E2B_API_URL, E2B_SANDBOX_URL and E2B_DOMAIN.
type Options struct {
	// APIKey is sent as X-API-KEY on every control-plane call and nowhere
	// else. Required; self-hosted servers may accept any non-empty key.
	APIKey Secret
	// APIURL is the control plane's base URL; "" means https://api.<Domain>.
	APIURL string
	// SandboxURL, when set, is the data plane of every sandbox: calls carry
	// the sandbox id and port in the E2b-Sandbox-Id / E2b-Sandbox-Port
	// headers. "" means https://49983-<id>.<domain> per sandbox.
	SandboxURL string
	// Domain is E2B's base domain; "" means DefaultDomain. A domain in a
	// sandbox's create answer wins for its data plane.
	Domain string
	// HTTPClient carries both planes; nil means a client of the driver's
	// own, whose idle connections Close releases.
	HTTPClient *http.Client
	// Logger receives the driver's logs; nil discards them.
	Logger *slog.Logger
	// MaxRetries bounds the retries of a throttled (429) call other than
	// create, which returns the throttle to the caller's create gate at
	// once; 0 means DefaultMaxRetries and a negative value none.
	MaxRetries int
	// MaxRetryWait is the longest Retry-After the driver waits out itself;
	// 0 means DefaultMaxRetryWait.
	MaxRetryWait time.Duration
}

// hostRE is a host name with an optional port: what a domain may be.
// Compiled on first use: every berth process (a sandbox's agent too) links
// this package, and compiling at init cost each one's start.
var hostRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?$`)
})

// fill validates o and applies the defaults. URLs are not quoted in errors:
// one may carry credentials.
func (o *Options) fill() error {
	if o.APIKey == nil || strings.TrimSpace(o.APIKey.Reveal()) == "" {
		return errdefs.Errorf(errdefs.Unauthenticated, "an E2B API key is required (E2B_API_KEY)")
	}
	if strings.ContainsAny(o.APIKey.Reveal(), "\r\n") {
		return errdefs.Errorf(errdefs.InvalidArgument, "the E2B API key contains a line break")
	}
	if o.Domain == "" {
		o.Domain = DefaultDomain
	}
	if !hostRE().MatchString(o.Domain) {
		return errdefs.Errorf(errdefs.InvalidArgument, "E2B_DOMAIN %q is not a host name", o.Domain)
	}
	if o.APIURL == "" {
		o.APIURL = "https://api." + o.Domain
	}
	if !httpURL(o.APIURL) {
		return errdefs.Errorf(errdefs.InvalidArgument, "E2B_API_URL is not an http(s) URL with a host")
	}
	o.APIURL = strings.TrimRight(o.APIURL, "/")
	if o.SandboxURL != "" {
		if !httpURL(o.SandboxURL) {
			return errdefs.Errorf(errdefs.InvalidArgument, "E2B_SANDBOX_URL is not an http(s) URL with a host")
		}
		o.SandboxURL = strings.TrimRight(o.SandboxURL, "/")
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = DefaultMaxRetries
	}
	if o.MaxRetries < 0 {
		o.MaxRetries = 0
	}
	if o.MaxRetryWait <= 0 {
		o.MaxRetryWait = DefaultMaxRetryWait
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
		u.RawQuery == "" && u.Fragment == ""
}
