package image

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"golang.org/x/sync/errgroup"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Layers unpacked at once by one pull: downloads overlap, and on the small
// machines berth targets more would only compete for the disk.
const parallelLayers = 3

// PullOptions bound one pull. The zero value is the operator's pull.
type PullOptions struct {
	// Policy, when set, guards the pull for the remote client that named
	// the image (driver.PullPolicy): every connection, redirects included,
	// is checked where it is dialled and refused unless its address is
	// public or its registry allowed; plain HTTP goes only to allowed
	// registries (and InsecureRegistries); a failure is a *PullError.
	Policy *driver.PullPolicy
}

// Pull returns the image ref, pulling it from its registry if the store
// does not have it (credentials from the default keychain: docker config,
// credential helpers). Concurrent pulls of one ref fetch it once.
func (s *Store) Pull(ctx context.Context, ref string) (Image, error) {
	return s.PullWith(ctx, ref, PullOptions{})
}

// PullWith is Pull bounded by o. A stored image is returned without a
// connection, whoever pulled it.
func (s *Store) PullWith(ctx context.Context, ref string, o PullOptions) (Image, error) {
	if err := o.Policy.Validate(); err != nil {
		return Image{}, err
	}
	r, err := s.parseFor(ref, o.Policy)
	if err != nil {
		return Image{}, err
	}
	if img, err := s.resolve(r); err == nil || !errors.Is(err, errdefs.ErrNotFound) {
		return img, err
	}
	rt := s.transport
	key := "pull " + r.Name()
	if o.Policy != nil {
		t, guarded, err := s.guardedTransport(o.Policy)
		if err != nil {
			return Image{}, err
		}
		defer t.CloseIdleConnections()
		// A guarded pull never shares an unguarded one's connections, nor
		// its outcome: either could pass what the other refuses.
		rt, key = guarded, key+" guarded "+strings.Join(o.Policy.Allow, ",")
	}
	img, err := shared(ctx, &s.flight, key, func() (Image, error) {
		if img, err := s.resolve(r); err == nil {
			return img, nil // another caller finished it just now
		}
		return s.pull(ctx, r, rt)
	})
	if err != nil && o.Policy != nil {
		return Image{}, clientError(r.String(), err)
	}
	return img, err
}

func (s *Store) pull(ctx context.Context, r name.Reference, rt http.RoundTripper) (Image, error) {
	unlock, err := s.holdLayers()
	if err != nil {
		return Image{}, err
	}
	defer unlock()
	img, err := remote.Image(r,
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithPlatform(s.platform),
		remote.WithTransport(rt),
	)
	if err != nil {
		return Image{}, remoteError(r, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return Image{}, remoteError(r, err)
	}
	rec, err := s.add(ctx, r.Name(), img, digest.String())
	if err != nil {
		return Image{}, remoteError(r, err)
	}
	return rec, nil
}

// add unpacks every layer of img and records it under key. The caller holds
// the collect lock shared.
func (s *Store) add(ctx context.Context, key string, img v1.Image, digest string) (Image, error) {
	cfgName, err := img.ConfigName()
	if err != nil {
		return Image{}, &sourceError{fmt.Errorf("config: %w", err)}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return Image{}, &sourceError{fmt.Errorf("config: %w", err)}
	}
	layers, err := img.Layers()
	if err != nil {
		return Image{}, &sourceError{fmt.Errorf("layers: %w", err)}
	}
	diffIDs := make([]string, len(layers))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallelLayers)
	for i, l := range layers {
		g.Go(func() error {
			d, err := l.DiffID()
			if err != nil {
				return &sourceError{fmt.Errorf("layer %d: %w", i, err)}
			}
			diffIDs[i], err = s.ensureLayer(gctx, layerSource{diffID: d.String(), open: l.Uncompressed})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return Image{}, err
	}
	return s.put(Image{
		Ref:     key,
		Digest:  digest,
		ID:      cfgName.String(),
		Config:  configOf(cf),
		DiffIDs: diffIDs,
	})
}

// remoteError classes a registry failure and names the reference.
func remoteError(r name.Reference, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errdefs.ClassOf(err) != errdefs.Unknown {
		return fmt.Errorf("pull %s: %w", r.String(), err)
	}
	redactURLs(err)
	class := errdefs.Unknown
	var te *transport.Error
	var ne net.Error
	var ue *url.Error
	var se *sourceError
	switch {
	case errors.As(err, &te):
		class = statusClass(te)
	case errors.As(err, &ne), errors.As(err, &ue), errors.As(err, &se):
		class = errdefs.Unavailable
	}
	if class == errdefs.Unknown {
		return fmt.Errorf("pull %s: %w", r.String(), err)
	}
	return errdefs.Errorf(class, "pull %s: %w", r.String(), err)
}

// statusClass is the class of a registry's answer: the OCI error code it
// names, else its status read through the one table
// (errdefs.ClassOfHTTPStatus). A 500 is Unknown there, not Unavailable:
// go-containerregistry's transport has already retried it (with 408, 429,
// 502, 503 and 504: three tries, 1 s and 3 s apart), so one that reaches
// here has persisted, and a retry above (a create gate's eight) would
// only pull a failing registry again.
func statusClass(te *transport.Error) errdefs.Class {
	for _, d := range te.Errors {
		switch d.Code {
		case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode:
			return errdefs.NotFound
		case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
			return errdefs.Unauthenticated
		case transport.TooManyRequestsErrorCode:
			return errdefs.ResourceExhausted
		}
	}
	return errdefs.ClassOfHTTPStatus(te.StatusCode)
}

// redactURLs drops query strings from URLs in err: blob downloads are
// redirected to signed storage URLs whose signature is a credential.
func redactURLs(err error) {
	for err != nil {
		if ue, ok := err.(*url.Error); ok {
			if u, perr := url.Parse(ue.URL); perr == nil && u.RawQuery != "" {
				u.RawQuery = "REDACTED"
				ue.URL = u.String()
			}
		}
		switch x := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				redactURLs(e)
			}
			return
		default:
			err = errors.Unwrap(err)
		}
	}
}

// isLoopback reports whether a registry host[:port] is this machine.
func isLoopback(registry string) bool {
	host := registry
	if h, _, err := net.SplitHostPort(registry); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (s *Store) plainHTTPAllowed(host string) bool {
	return isLoopback(host) || s.insecure[host]
}

// httpGuard refuses plain-HTTP requests except to allowed hosts.
// go-containerregistry itself would fall back to HTTP for private
// addresses, where a machine in the middle could then serve any image.
type httpGuard struct {
	base    http.RoundTripper
	allowed func(host string) bool
	rule    string // who may, for the error; "" for the store's rule
}

func (g *httpGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !g.allowed(req.URL.Host) {
		if req.Body != nil {
			req.Body.Close()
		}
		rule := g.rule
		if rule == "" {
			rule = "only loopback registries and Options.InsecureRegistries may use it"
		}
		return nil, errdefs.Errorf(errdefs.NotSupported, "plain HTTP to %s refused: %s", req.URL.Host, rule)
	}
	return g.base.RoundTrip(req)
}
