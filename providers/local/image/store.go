package image

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sync/singleflight"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Image is an image in the store, ready to be stacked into a rootfs.
type Image struct {
	// Ref is the canonical reference the image is stored under, e.g.
	// "index.docker.io/library/debian:bookworm".
	Ref string `json:"ref"`
	// Digest is the manifest digest; empty for images imported from a plain
	// rootfs tar or a docker-save tarball, which carry no manifest.
	Digest string `json:"digest,omitempty"`
	// ID is the digest of the image's config, the same for every copy of it.
	ID     string `json:"id"`
	Config Config `json:"config"`
	// DiffIDs are the layers' uncompressed digests, lowest layer first.
	DiffIDs []string `json:"diff_ids"`
	// Layers are the unpacked layer directories, in the order of DiffIDs
	// (lowest first; reverse them for overlayfs's lowerdir). Read-only:
	// they are shared by every image that has the layer.
	Layers []string `json:"-"`
	// Stored is when the image was pulled or imported.
	Stored time.Time `json:"stored"`
}

// Config is the part of an image's config that decides how its processes run.
type Config struct {
	Env        []string          `json:"env,omitempty"`
	WorkingDir string            `json:"working_dir,omitempty"`
	User       string            `json:"user,omitempty"`
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Cmd        []string          `json:"cmd,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	StopSignal string            `json:"stop_signal,omitempty"`
	OS         string            `json:"os,omitempty"`
	// Architecture is GOARCH-style ("amd64"), with Variant for arm.
	Architecture string `json:"architecture,omitempty"`
	Variant      string `json:"variant,omitempty"`
}

func configOf(cf *v1.ConfigFile) Config {
	return Config{
		Env:          cf.Config.Env,
		WorkingDir:   cf.Config.WorkingDir,
		User:         cf.Config.User,
		Entrypoint:   cf.Config.Entrypoint,
		Cmd:          cf.Config.Cmd,
		Labels:       cf.Config.Labels,
		StopSignal:   cf.Config.StopSignal,
		OS:           cf.OS,
		Architecture: cf.Architecture,
		Variant:      cf.Variant,
	}
}

// Options configure a Store. The zero value is ready to use.
type Options struct {
	// Platform picks one image from a multi-platform index, as "os/arch" or
	// "os/arch/variant". Default: linux and the architecture berth runs on.
	Platform string
	// InsecureRegistries may be reached over plain HTTP, as "host:port".
	// Loopback registries (localhost, 127.0.0.0/8, ::1) always may; no other
	// registry may, not even a private-address one, unless listed here.
	InsecureRegistries []string
	// Transport carries registry requests; default: go-containerregistry's
	// default transport. The plain-HTTP rule above wraps it. A guarded
	// pull (PullOptions.Policy) needs it to be an *http.Transport: it uses
	// a copy whose dials go through the guard.
	Transport http.RoundTripper
	// Resolver resolves registry names for guarded pulls, which dial the
	// addresses they checked; default: net.DefaultResolver.
	Resolver *net.Resolver
}

// Store is the image store on one state directory. It is safe for
// concurrent use, and several processes may share one state directory.
type Store struct {
	imagesDir string
	layersDir string
	platform  v1.Platform
	insecure  map[string]bool
	base      http.RoundTripper // Options.Transport or the default
	transport http.RoundTripper // base behind the plain-HTTP rule
	resolver  *net.Resolver
	flight    singleflight.Group

	unpacks atomic.Int64 // layer unpacks this Store started, for tests
}

// Open opens (creating if needed) the image store in stateDir.
func Open(stateDir string, opts Options) (*Store, error) {
	if stateDir == "" {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "image store: no state directory")
	}
	plat := fmt.Sprintf("linux/%s", runtime.GOARCH)
	if opts.Platform != "" {
		plat = opts.Platform
	}
	p, err := v1.ParsePlatform(plat)
	if err != nil || p.OS == "" || p.Architecture == "" {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "image store: platform %q: want os/arch[/variant]", plat)
	}
	s := &Store{
		imagesDir: filepath.Join(stateDir, "images"),
		layersDir: filepath.Join(stateDir, "layers"),
		platform:  *p,
		insecure:  map[string]bool{},
	}
	for _, r := range opts.InsecureRegistries {
		s.insecure[r] = true
	}
	base := opts.Transport
	if base == nil {
		base = remote.DefaultTransport
	}
	s.base, s.resolver = base, opts.Resolver
	if s.resolver == nil {
		s.resolver = net.DefaultResolver
	}
	s.transport = &httpGuard{base: base, allowed: s.plainHTTPAllowed}
	for _, d := range []string{s.imagesDir, s.layersDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("image store: %w", err)
		}
	}
	s.removeStaleTemps()
	return s, nil
}

// LayersDir is the directory holding the unpacked layers, for callers that
// mount with paths relative to it.
func (s *Store) LayersDir() string { return s.layersDir }

// parse turns a user's reference into go-containerregistry's, allowing
// plain HTTP for loopback registries only.
func (s *Store) parse(ref string) (name.Reference, error) { return s.parseFor(ref, nil) }

// parseFor is parse for a pull under policy p, whose registries may use
// plain HTTP too.
func (s *Store) parseFor(ref string, p *driver.PullPolicy) (name.Reference, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "image reference %q: %w", ref, err)
	}
	reg := r.Context().RegistryStr()
	if isLoopback(reg) || s.insecure[reg] || p.Allows(hostPort(reg, "443")) {
		if r, err = name.ParseReference(ref, name.Insecure); err != nil {
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "image reference %q: %w", ref, err)
		}
	}
	return r, nil
}

// Resolve returns a stored image with its layer directories. It never
// pulls: an image that is not stored is NotFound (see Pull).
func (s *Store) Resolve(ctx context.Context, ref string) (Image, error) {
	r, err := s.parse(ref)
	if err != nil {
		return Image{}, err
	}
	return s.resolve(r)
}

func (s *Store) resolve(r name.Reference) (Image, error) {
	idx, err := s.readIndex()
	if err != nil {
		return Image{}, err
	}
	rec, ok := idx.lookup(r)
	if !ok {
		return Image{}, errdefs.Errorf(errdefs.NotFound, "image %q is not in the store; pull or import it", r.String())
	}
	img, err := s.withLayers(rec)
	if err != nil {
		return Image{}, err
	}
	for i, dir := range img.Layers {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return Image{}, errdefs.Errorf(errdefs.NotFound, "image %q: layer %s is missing; pull or import it again", r.String(), img.DiffIDs[i])
		}
	}
	return img, nil
}

func (s *Store) withLayers(rec Image) (Image, error) {
	rec.Layers = make([]string, len(rec.DiffIDs))
	for i, d := range rec.DiffIDs {
		dir, err := s.layerPath(d)
		if err != nil {
			return Image{}, err
		}
		rec.Layers[i] = dir
	}
	return rec, nil
}

// List returns the stored images sorted by reference.
func (s *Store) List(ctx context.Context) ([]Image, error) {
	idx, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	out := make([]Image, 0, len(idx.Images))
	for _, rec := range idx.Images {
		img, err := s.withLayers(rec)
		if err != nil {
			return nil, err
		}
		out = append(out, img)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref < out[j].Ref })
	return out, nil
}

// Remove forgets ref and deletes the layers no remaining image uses. The
// caller makes sure no running sandbox is stacked on those layers.
func (s *Store) Remove(ctx context.Context, ref string) error {
	r, err := s.parse(ref)
	if err != nil {
		return err
	}
	removed := false
	err = s.updateIndex(func(idx *index) error {
		rec, ok := idx.lookup(r)
		if !ok {
			return errdefs.Errorf(errdefs.NotFound, "image %q is not in the store", r.String())
		}
		delete(idx.Images, rec.Ref)
		removed = true
		return nil
	})
	if err != nil || !removed {
		return err
	}
	return s.collect()
}

// put records img under its Ref.
func (s *Store) put(img Image) (Image, error) {
	img.Stored = time.Now().UTC()
	img.Layers = nil
	if err := s.updateIndex(func(idx *index) error {
		idx.Images[img.Ref] = img
		return nil
	}); err != nil {
		return Image{}, err
	}
	return s.withLayers(img)
}

// shared runs fn once for concurrent callers with the same key. When the
// caller that ran it was cancelled, the others try again (a few times)
// rather than fail with someone else's cancellation.
func shared[T any](ctx context.Context, g *singleflight.Group, key string, fn func() (T, error)) (T, error) {
	for try := 0; ; try++ {
		v, err, _ := g.Do(key, func() (any, error) { return fn() })
		if err != nil && ctx.Err() == nil && try < 3 &&
			(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			continue
		}
		if err != nil {
			var zero T
			return zero, err
		}
		return v.(T), nil
	}
}
