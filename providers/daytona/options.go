package daytona

import (
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// DefaultBaseURL is Daytona's public API.
const DefaultBaseURL = "https://app.daytona.io/api"

// Secret is a credential whose contents only Reveal returns. The registry's
// Secret satisfies it; the driver calls Reveal only to set the
// Authorization header.
type Secret interface {
	Reveal() string
}

// Limits are Daytona's per-sandbox maxima. Zero fields take the defaults of
// a new account: 4 cores, 8 GB memory, 10 GB disk.
type Limits struct {
	CPU      int
	MemoryGB int
	DiskGB   int
}

func (l Limits) withDefaults() Limits {
	if l.CPU <= 0 {
		l.CPU = 4
	}
	if l.MemoryGB <= 0 {
		l.MemoryGB = 8
	}
	if l.DiskGB <= 0 {
		l.DiskGB = 10
	}
	return l
}

// Options configure New.
type Options struct {
	// BaseURL is the REST API's base ("" means DefaultBaseURL), as in
	// DAYTONA_API_URL.
	BaseURL string
	// APIKey is the bearer token; required.
	APIKey Secret
	// Target is the region sandboxes are created in (DAYTONA_TARGET); ""
	// means the organization's default.
	Target string
	// HTTPClient sends every request; it must not set a Timeout, which would
	// cut log streams. Nil means a client of its own.
	HTTPClient *http.Client
	// Logger receives debug lines (method, path, status, duration); never
	// headers or bodies. Nil discards.
	Logger *slog.Logger
	// Limits are the per-sandbox maxima checked before a create is sent.
	Limits Limits
	// DefaultDiskGB is the disk Daytona gives a sandbox whose Spec names none
	// (3 GB); the disk quota cap counts it.
	DefaultDiskGB int
	// DiskQuotaGB, when positive, caps the disk of the sandboxes this value
	// keeps at once (Create waits for room), so that concurrent sandboxes x
	// disk per sandbox stay under the account's total disk quota. Stopped
	// sandboxes count against that quota too, so the cap holds a sandbox's
	// share until it is deleted.
	DiskQuotaGB int
	// AutoDelete is how long a stopped sandbox is kept: zero means 24 hours
	// (1440 minutes); negative means never. DeleteOnStop asks Daytona to
	// delete a sandbox as soon as it stops instead.
	AutoDelete   time.Duration
	DeleteOnStop bool
	// StartTimeout bounds the wait for a new sandbox to reach `started`,
	// image build included; zero means 10 minutes.
	StartTimeout time.Duration
	// RateLimitRetries is how many times a call other than create is retried
	// after a 429; zero means 5, negative none.
	RateLimitRetries int
	// PollMin and PollMax bound the interval of status and log polls;
	// zero means 50 ms and 1 s.
	PollMin, PollMax time.Duration
	// PreviewTTL is how long an Endpoint's signed preview URL works; zero
	// means an hour, at most 24 hours.
	PreviewTTL time.Duration
	// KeepActive is how often a handle that handed out an endpoint
	// refreshes the sandbox's activity (preview traffic does not count
	// for auto-stop); zero means 300 s.
	KeepActive time.Duration
}

func (o Options) withDefaults() (Options, *url.URL, error) {
	if o.APIKey == nil || strings.TrimSpace(o.APIKey.Reveal()) == "" {
		return o, nil, errdefs.Errorf(errdefs.Unauthenticated, "daytona: no API key (set DAYTONA_API_KEY or its key file)")
	}
	if o.BaseURL == "" {
		o.BaseURL = DefaultBaseURL
	}
	base, err := url.Parse(strings.TrimRight(o.BaseURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return o, nil, errdefs.Errorf(errdefs.InvalidArgument, "daytona: API URL %q is not an http(s) URL", o.BaseURL)
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if o.HTTPClient.Timeout != 0 {
		return o, nil, errdefs.Errorf(errdefs.InvalidArgument, "daytona: the HTTP client must not set a Timeout (it would cut log streams); bound calls with contexts")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Limits = o.Limits.withDefaults()
	if o.DefaultDiskGB <= 0 {
		o.DefaultDiskGB = 3
	}
	if o.DiskQuotaGB < 0 {
		return o, nil, errdefs.Errorf(errdefs.InvalidArgument, "daytona: disk quota %d GB is negative", o.DiskQuotaGB)
	}
	if o.AutoDelete == 0 {
		o.AutoDelete = 24 * time.Hour
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 10 * time.Minute
	}
	if o.RateLimitRetries == 0 {
		o.RateLimitRetries = 5
	}
	if o.RateLimitRetries < 0 {
		o.RateLimitRetries = 0
	}
	if o.PollMin <= 0 {
		o.PollMin = 50 * time.Millisecond
	}
	if o.PollMax < o.PollMin {
		o.PollMax = max(time.Second, o.PollMin)
	}
	if o.PreviewTTL <= 0 {
		o.PreviewTTL = defaultPreviewTTL
	}
	if o.PreviewTTL < time.Second || o.PreviewTTL > maxPreviewTTL {
		return o, nil, errdefs.Errorf(errdefs.InvalidArgument, "daytona: preview URL lifetime %v is not between 1 s and 24 h", o.PreviewTTL)
	}
	if o.KeepActive <= 0 {
		o.KeepActive = defaultKeepActive
	}
	return o, base, nil
}

// autoDeleteMinutes is the create field: 0 deletes on stop, -1 never.
func (o Options) autoDeleteMinutes() int {
	switch {
	case o.DeleteOnStop:
		return 0
	case o.AutoDelete < 0:
		return -1
	default:
		return ceilMinutes(o.AutoDelete)
	}
}

// ceilMinutes rounds d up to whole minutes, at least one.
func ceilMinutes(d time.Duration) int {
	m := int((d + time.Minute - 1) / time.Minute)
	return max(m, 1)
}
