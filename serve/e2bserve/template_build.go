package e2bserve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/internal/tailbuf"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/serve/internal/core"
)

// start runs a requested build of r for keyID, unless the key already has
// its most builds going (429) or the build was started before (400).
func (t *templates) start(keyID string, b *build, r *recipe) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return http.StatusServiceUnavailable, sandbox.Errorf(sandbox.Unavailable, "the server is shutting down")
	}
	if b.started {
		return http.StatusBadRequest, sandbox.Errorf(sandbox.InvalidArgument, "build %s was started already; request a new build (POST /v3/templates)", b.id)
	}
	k := t.key(keyID)
	if k.active >= t.opts.MaxConcurrentBuildsPerKey {
		return http.StatusTooManyRequests, sandbox.Errorf(sandbox.ResourceExhausted, "this API key has %d builds going, the most this server runs per key; wait for one to finish", k.active)
	}
	k.active++
	b.started = true
	b.log.setLines(r.lines)
	t.wg.Add(1)
	go t.run(keyID, b, r)
	return http.StatusAccepted, nil
}

// run builds b and records the outcome.
func (t *templates) run(keyID string, b *build, r *recipe) {
	defer t.wg.Done()
	start := time.Now()
	out, result, release, err := t.buildInTurn(keyID, b, r)
	// The turn is given back after the outcome is recorded (defers run in
	// reverse: t.mu first): a build of the same alias waiting for it must
	// find this one's image in the cache, not build again.
	defer release()
	if err != nil {
		err = t.explain(r, err)
		b.log.add("error", stepOfErr(r, err), err.Error())
	} else {
		b.log.add("info", "", fmt.Sprintf("template %s is ready (image %s, %s)", b.tmpl.alias, out.image, time.Since(start).Round(time.Millisecond)))
	}
	b.log.close() // every line is in before the status says the build ended
	t.mu.Lock()
	defer t.mu.Unlock()
	t.key(keyID).active--
	t.builds.WithLabelValues(result).Inc()
	if err != nil {
		b.status = statusError
		b.reason = &e2bapi.BuildStatusReason{Message: err.Error(), Step: stepOfErr(r, err), LogEntries: b.log.last(logTailLines)}
		t.s.log.Info("template build failed", "template", b.tmpl.alias, "build", b.id, "key", keyID, "error", err)
		return
	}
	b.status, b.out = statusReady, out
	tm := b.tmpl
	tm.latest = b
	for _, tag := range b.tags {
		tm.tags[tag] = b
	}
	k := t.key(keyID)
	if len(k.built) >= maxContentCache {
		for d := range k.built { // any one: a miss only rebuilds
			delete(k.built, d)
			break
		}
	}
	k.built[b.digest] = out
	t.s.log.Info("template built", "template", tm.alias, "build", b.id, "key", keyID, "image", out.image, "result", result, "duration", time.Since(start))
}

// buildInTurn waits for the template's other builds, then builds r unless
// the template, or another template of the key, is built from the same
// content already (a cache hit, which starts nothing). result is "built",
// "cached" or "failed". release gives the template's turn back; the
// caller calls it once the outcome is recorded.
func (t *templates) buildInTurn(keyID string, b *build, r *recipe) (out builtImage, result string, release func(), err error) {
	tm := b.tmpl
	release = func() {}
	select {
	case tm.turn <- struct{}{}:
	default:
		b.log.add("info", "", "waiting for another build of "+tm.alias+" to finish")
		select {
		case tm.turn <- struct{}{}:
		case <-t.ctx.Done():
			return builtImage{}, "failed", release, sandbox.Errorf(sandbox.Unavailable, "the server shut down before the build started")
		}
	}
	release = func() { <-tm.turn }
	digest := r.digest(keyID)
	t.mu.Lock()
	b.status, b.digest = statusBuilding, digest
	hit, cached := builtImage{}, false
	if !r.force {
		if l := tm.latest; l != nil && l.digest == digest {
			hit, cached = l.out, true
		} else {
			hit, cached = t.key(keyID).built[digest]
		}
	}
	t.mu.Unlock()
	if cached {
		b.log.add("info", "", "cache hit: "+tm.alias+" is built from the same steps and files already (image "+hit.image+"); nothing to build")
		return hit, "cached", release, nil
	}
	ctx, cancel := context.WithTimeout(t.ctx, t.opts.BuildTimeout)
	defer cancel()
	out, err = t.buildImage(ctx, keyID, b, r)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = sandbox.Errorf(sandbox.DeadlineExceeded, "the build took longer than this server's limit of %v: %v", t.opts.BuildTimeout, err)
	}
	if err != nil {
		return builtImage{}, "failed", release, err
	}
	return out, "built", release, nil
}

// buildImage writes the build context (the Dockerfile and each COPY's
// upload, unpacked with the upload bounds), builds it on the provider and
// runs the finalize step.
func (t *templates) buildImage(ctx context.Context, keyID string, b *build, r *recipe) (builtImage, error) {
	work := filepath.Join(t.dir, "work", b.id)
	defer os.RemoveAll(work)
	// The context directory's name is the built image's name on local.
	dir := filepath.Join(work, b.tmpl.alias)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return builtImage{}, err
	}
	df := r.dockerfile
	if r.force {
		df += "# force: rebuild (build " + b.id + ")\n" // a new key for the builder's cache
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o600); err != nil {
		return builtImage{}, err
	}
	for _, c := range r.copies {
		if err := t.unpackUpload(ctx, keyID, c.hash, filepath.Join(dir, c.dir)); err != nil {
			return builtImage{}, fmt.Errorf("unpacking the files of %s: %w", c.dir[1:], err)
		}
	}
	spec := sandbox.Spec{Build: &sandbox.Build{ContextDir: dir}, Resources: t.s.opts.Resources, TTL: t.opts.BuildTimeout,
		Network: sandbox.Network{Mode: sandbox.NetworkNone}, Pull: r.pull}
	if !t.s.opts.DenyInternet && t.s.caps.Supports(sandbox.NetworkPublic) {
		spec.Network.Mode = sandbox.NetworkPublic // steps install packages, as on E2B
	}
	b.log.add("info", "", "building "+b.tmpl.alias+" on "+t.s.p.Name())
	ref, err := t.s.p.BuildImage(ctx, spec, b.log)
	if err != nil {
		return builtImage{}, err
	}
	out := builtImage{image: ref, startCmd: r.startCmd, readyCmd: r.readyCmd}
	if err := t.finalize(ctx, b, out, spec); err != nil {
		return builtImage{}, err
	}
	return out, nil
}

// finalize checks a template with a start or ready command as E2B's last
// build step does: a sandbox of the image runs the start command until the
// ready command succeeds.
func (t *templates) finalize(ctx context.Context, b *build, out builtImage, build sandbox.Spec) error {
	if out.startCmd == "" && out.readyCmd == "" {
		return nil
	}
	b.log.add("info", stepFinalize, "[finalize] starting a sandbox: start command, then the ready command until it succeeds")
	sb, err := t.s.p.Create(ctx, sandbox.Spec{Image: out.image, Resources: build.Resources, Network: build.Network,
		TTL: t.opts.ReadyTimeout + time.Minute, Labels: map[string]string{core.LauncherLabel: core.LauncherValue}})
	if err != nil {
		return stepError{stepFinalize, err}
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), core.TeardownTimeout)
		defer cancel()
		_ = sb.Delete(dctx)
		_ = sb.Close()
	}()
	if err := t.startTemplate(ctx, sb, out); err != nil {
		return stepError{stepFinalize, err}
	}
	return nil
}

// shellArgs runs cmd as a RUN step does.
func shellArgs(cmd string) []string { return []string{"/bin/sh", "-c", runWrapper, "sh", cmd} }

// startTemplate runs a template's start command in sb, in the background
// (it lives as long as sb), and waits until the ready command succeeds,
// for at most ReadyTimeout.
func (t *templates) startTemplate(ctx context.Context, sb *sandbox.Sandbox, img builtImage) error {
	if img.startCmd == "" && img.readyCmd == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.opts.ReadyTimeout)
	defer cancel()
	startOut := &tailbuf.Buffer{Max: 2048}
	if img.startCmd != "" {
		// The process outlives ctx: it runs until the sandbox ends.
		if _, err := sb.Exec(ctx, sandbox.Command{Args: shellArgs(img.startCmd), Stdout: startOut, Stderr: startOut}); err != nil {
			return fmt.Errorf("start command: %w", err)
		}
	}
	if img.readyCmd == "" {
		return nil
	}
	for {
		res, err := sb.Run(ctx, sandbox.Command{Args: shellArgs(img.readyCmd), Timeout: t.opts.ReadyTimeout})
		if err == nil && res.ExitCode == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return sandbox.Errorf(sandbox.DeadlineExceeded, "the ready command %q did not succeed within %v; the start command's output ends: %s",
				shorten(img.readyCmd, 200), t.opts.ReadyTimeout, strings.TrimSpace(string(startOut.Bytes())))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// stepError is an error of a named step.
type stepError struct {
	step string
	err  error
}

func (e stepError) Error() string { return e.err.Error() }
func (e stepError) Unwrap() error { return e.err }

// stepOfErr is the step a build error names: a finalize error, a base
// image that cannot be had, or the Dockerfile line the builder names.
func stepOfErr(r *recipe, err error) string {
	var se stepError
	if errors.As(err, &se) {
		return se.step
	}
	if strings.Contains(err.Error(), "(FROM)") {
		return stepBase
	}
	return r.stepOf(err.Error())
}

// explain rewrites the builder's Dockerfile lines in an error as the
// template's steps, which is what its author wrote.
func (t *templates) explain(r *recipe, err error) error {
	msg := err.Error()
	step := r.stepOf(msg)
	if step == "" {
		return err
	}
	for _, sl := range r.lines {
		if sl.step != step {
			continue
		}
		for _, cut := range []string{shorten(sl.raw, 200), sl.raw} {
			msg = strings.Replace(msg, cut, shorten(sl.show, 200), 1)
		}
	}
	return stepError{step, sandbox.Classify(sandbox.ClassOf(err), fmt.Errorf("step %s: %s", step, msg))}
}
