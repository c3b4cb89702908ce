package imagebuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/providers/local/dockerfile"
	"github.com/berth-sh/berth/providers/local/image"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Repository is the repository built images are stored under.
const Repository = "berth.build"

// keyLabel carries the full key in the built image's config, so that
// a cache hit is checked against the whole digest, not its first 12 digits.
const keyLabel = "sh.berth.build.key"

// builderVersion goes into every key: a change to what a build produces
// from the same input changes it (2: Docker's parser, so continuations,
// quotes, SHELL and ARG scopes read as Docker reads them).
const builderVersion = "berth-local-build/2"

// SandboxLabel marks a build's sandbox (its value is the short key).
const SandboxLabel = "berth.build"

// Host is what a build needs from the provider whose sandboxes run it.
type Host interface {
	// Image returns the image ref names, pulling or seeding it when the
	// store lacks it.
	Image(ctx context.Context, ref string) (image.Image, error)
	// Start starts the sandbox a build's steps run in (spec: the base
	// image, as root, with the build Spec's network and resources).
	Start(ctx context.Context, spec driver.Spec) (Sandbox, error)
}

// Sandbox is a build's sandbox as its host runs it.
type Sandbox interface {
	// Exec starts a RUN step's command.
	Exec(ctx context.Context, cmd driver.Command) (driver.Process, error)
	// Rootfs is the host path of the sandbox's root file system.
	Rootfs() string
	// KillStrays ends every process of the sandbox but its init, and
	// returns once they are gone: what a RUN left running must not touch
	// the tree while the host writes into it.
	KillStrays(ctx context.Context) error
	// Stop ends every process, init included, and returns the host path
	// of the directory holding what the steps wrote (the overlay's upper
	// directory), still until Close.
	Stop(ctx context.Context) (string, error)
	// Close deletes the sandbox, whatever happened to the build.
	Close(ctx context.Context)
}

// Builder builds the images of Specs with a Build, for one host and store.
type Builder struct {
	Host  Host
	Store *image.Store
	// LockDir holds the lock files builds of one key take turns on.
	LockDir string
	// Log gets progress and warnings; nil discards them.
	Log *slog.Logger
	// Output gets the build as a person reads it: a line
	// "Dockerfile:N: INSTRUCTION" before each step, then what a RUN
	// prints (stdout and stderr as they come). nil discards it; a write
	// error is ignored (the build does not depend on its reader).
	Output io.Writer
}

// output is Output, never nil and never failing.
func (b *Builder) output() io.Writer {
	if b.Output == nil {
		return io.Discard
	}
	return ignoreErrors{b.Output}
}

type ignoreErrors struct{ w io.Writer }

func (w ignoreErrors) Write(p []byte) (int, error) {
	_, _ = w.w.Write(p)
	return len(p), nil
}

func (b *Builder) log() *slog.Logger {
	if b.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return b.Log
}

// Build returns the image of spec.Build, building it unless it is stored.
func (bd *Builder) Build(ctx context.Context, spec driver.Spec) (image.Image, error) {
	b := spec.Build
	croot, err := os.OpenRoot(b.ContextDir)
	if err != nil {
		return image.Image{}, errdefs.Errorf(errdefs.InvalidArgument, "build context: %v", err)
	}
	defer croot.Close()
	dfName := b.Dockerfile
	if dfName == "" {
		dfName = "Dockerfile"
	}
	df, err := readContextFile(croot, dfName)
	if err != nil {
		return image.Image{}, err
	}
	first, err := dockerfile.Parse(bytes.NewReader(df), b.Args)
	if err != nil {
		return image.Image{}, err
	}
	base, err := bd.Host.Image(ctx, first.Base)
	if err != nil {
		return image.Image{}, fmt.Errorf("base image %s (FROM): %w", first.Base, err)
	}
	file, err := dockerfile.ParseWithEnv(bytes.NewReader(df), b.Args, base.Config.Env)
	if err != nil {
		return image.Image{}, err
	}
	key, err := buildKey(croot, file, base, df, b.Args)
	if err != nil {
		return image.Image{}, err
	}
	ref := Repository + "/" + buildName(b.ContextDir) + ":" + key[:12]
	unlock, err := bd.lockBuild(ctx, key)
	if err != nil {
		return image.Image{}, err
	}
	defer unlock()
	if img, err := bd.Store.Resolve(ctx, ref); err == nil && img.Config.Labels[keyLabel] == key {
		bd.log().Info("image build cache hit: no build needed", "image", img.Ref)
		fmt.Fprintf(bd.output(), "image %s is stored: no build needed\n", img.Ref)
		return img, nil
	}
	start := time.Now()
	bd.log().Info("building image", "image", ref, "from", base.Ref, "context", b.ContextDir)
	img, err := bd.runBuild(ctx, spec, croot, file, base, ref, key)
	if err != nil {
		return image.Image{}, fmt.Errorf("build %s: %w", ref, err)
	}
	bd.log().Info("built image", "image", img.Ref, "duration", time.Since(start).Round(time.Millisecond))
	return img, nil
}

// maxDockerfile bounds the Dockerfile read (the parser's own limit).
const maxDockerfile = 1 << 20

func readContextFile(root *os.Root, name string) ([]byte, error) {
	f, err := root.Open(filepath.ToSlash(filepath.Clean(name)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "build context has no %s", name)
	}
	if err != nil {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "build context: %s: %v", name, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxDockerfile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(b) > maxDockerfile {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "%s is larger than %d bytes", name, maxDockerfile)
	}
	return b, nil
}

// buildKey digests what the build reads; see the comment at the top.
func buildKey(root *os.Root, f *dockerfile.File, base image.Image, df []byte, args map[string]string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\nbase %q %s\ndockerfile %d\n", builderVersion, base.Ref, base.ID, len(df))
	h.Write(df)
	names := make([]string, 0, len(args))
	for k := range args {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(h, "\narg %q=%q", k, args[k])
	}
	for _, in := range f.Instructions {
		if in.Cmd != "COPY" && in.Cmd != "ADD" {
			continue
		}
		srcs, err := sources(root, in)
		if err != nil {
			return "", err
		}
		for _, s := range srcs {
			fmt.Fprintf(h, "\nline %d source %q\n", in.Line, s)
			if err := hashSource(h, root, s); err != nil {
				return "", stepErr(in, errdefs.InvalidArgument, "%v", err)
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

var nameUnsafe = regexp.MustCompile(`[^a-z0-9]+`)

// buildName names a built image after its context directory, or after the
// task that holds it when that directory is a Harbor task's environment/.
func buildName(dir string) string {
	dir = filepath.Clean(dir)
	n := filepath.Base(dir)
	if n == "environment" {
		n = filepath.Base(filepath.Dir(dir))
	}
	n = strings.Trim(nameUnsafe.ReplaceAllString(strings.ToLower(n), "-"), "-")
	if len(n) > 64 {
		n = strings.Trim(n[:64], "-")
	}
	if n == "" {
		n = "image"
	}
	return n
}

// lockBuild takes the build lock of key, waiting while another build of
// the same input holds it (a flock: held per open file, so goroutines of
// one process exclude each other as processes do).
func (bd *Builder) lockBuild(ctx context.Context, key string) (func(), error) {
	dir := bd.LockDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("build lock: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, key+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("build lock: %w", err)
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("build lock: %w", err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}
