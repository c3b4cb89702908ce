package imagebuild

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/berth-sh/berth/internal/passwd"
	"github.com/berth-sh/berth/internal/tailbuf"
	"github.com/berth-sh/berth/providers/local/dockerfile"
	"github.com/berth-sh/berth/providers/local/image"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// buildState is what the instructions so far have set.
type buildState struct {
	env     []string          // the image's environment, KEY=value, in order
	envSet  map[string]string // what ENV set (given to RUN over the agent's)
	args    map[string]string // ARG values in scope (RUN only, never stored)
	workDir string
	user    string
}

func newBuildState(c image.Config) *buildState {
	return &buildState{
		env: append([]string(nil), c.Env...), envSet: map[string]string{}, args: map[string]string{},
		workDir: c.WorkingDir, user: c.User,
	}
}

func (s *buildState) setEnv(k, v string) {
	s.envSet[k] = v
	for i, kv := range s.env {
		if name, _, _ := strings.Cut(kv, "="); name == k {
			s.env[i] = k + "=" + v
			return
		}
	}
	s.env = append(s.env, k+"="+v)
}

// runEnv is what a RUN gets on top of the sandbox's environment: ARG
// values (unless the environment has the name: ENV wins, as in Docker)
// and what ENV set.
func (s *buildState) runEnv() map[string]string {
	out := map[string]string{}
	has := map[string]bool{}
	for _, kv := range s.env {
		k, _, _ := strings.Cut(kv, "=")
		has[k] = true
	}
	for k, v := range s.args {
		if !has[k] && v != "" {
			out[k] = v
		}
	}
	maps.Copy(out, s.envSet)
	return out
}

// dir is the working directory of a step.
func (s *buildState) dir() string {
	if s.workDir == "" {
		return "/"
	}
	return s.workDir
}

// fsSteps are the instructions that need a sandbox.
func needsSandbox(f *dockerfile.File) bool {
	for _, in := range f.Instructions {
		switch in.Cmd {
		case "RUN", "COPY", "ADD", "WORKDIR":
			return true
		}
	}
	return false
}

// runBuild runs the instructions and commits the result as ref.
func (bd *Builder) runBuild(ctx context.Context, spec driver.Spec, croot *os.Root, f *dockerfile.File, base image.Image, ref, key string) (image.Image, error) {
	st := newBuildState(base.Config)
	var upper string
	if needsSandbox(f) {
		b, err := bd.startBuild(ctx, spec, base, key)
		if err != nil {
			return image.Image{}, err
		}
		defer b.close(ctx)
		for _, in := range f.Instructions {
			if err := b.step(ctx, st, croot, in); err != nil {
				return image.Image{}, err
			}
		}
		if upper, err = b.sb.Stop(ctx); err != nil {
			return image.Image{}, fmt.Errorf("stop the build sandbox: %w", err)
		}
	} else {
		for _, in := range f.Instructions {
			applyConfig(st, in)
		}
	}
	cfg := base.Config
	cfg.Env, cfg.WorkingDir, cfg.User = st.env, st.workDir, st.user
	cfg.Labels = maps.Clone(cfg.Labels)
	if cfg.Labels == nil {
		cfg.Labels = map[string]string{}
	}
	cfg.Labels[keyLabel] = key
	return bd.Store.Commit(ctx, image.CommitSpec{Ref: ref, Parent: base, Dir: upper, Exclude: buildExcluded, Config: cfg})
}

// buildExcluded names what a build sandbox's upper directory holds that is
// the sandbox's, not the image's: the agent's mount points and the files
// the runtime mounts over the image's /etc (writes to them never reach the
// upper directory, as in Docker, so only empty mount points would).
func buildExcluded(p string) bool {
	switch p {
	case ".berth", "etc/hosts", "etc/hostname", "etc/resolv.conf":
		return true
	}
	return false
}

// applyConfig applies an instruction that only changes the config.
func applyConfig(st *buildState, in dockerfile.Instruction) {
	switch in.Cmd {
	case "ENV":
		for i := 0; i+1 < len(in.Args); i += 2 {
			st.setEnv(in.Args[i], in.Args[i+1])
		}
	case "ARG":
		for i := 0; i+1 < len(in.Args); i += 2 {
			st.args[in.Args[i]] = in.Args[i+1]
		}
	case "USER":
		st.user = in.Args[0]
	case "WORKDIR":
		st.workDir = path.Join(st.dir(), in.Args[0])
		if path.IsAbs(in.Args[0]) {
			st.workDir = path.Clean(in.Args[0])
		}
	}
}

// builder is one build's sandbox.
type builder struct {
	sb   Sandbox
	tree *tree
	log  *slog.Logger
	out  io.Writer // Builder.Output
	// rootfs is the host path of the sandbox's root (the overlay mount).
	rootfs string
}

// startBuild makes the build's sandbox: the base image, as root, with the
// Spec's network and resources, for no longer than the Spec's sandbox
// would live.
func (bd *Builder) startBuild(ctx context.Context, spec driver.Spec, base image.Image, key string) (*builder, error) {
	ttl := spec.TTL
	if ttl <= 0 {
		ttl = driver.DefaultTTL
	}
	res := spec.Resources
	res.GPUs = 0
	sb, err := bd.Host.Start(ctx, driver.Spec{
		Image: base.Ref, User: "root", Resources: res, Network: spec.Network, TTL: ttl,
		Labels: map[string]string{SandboxLabel: key[:12]},
	})
	if err != nil {
		return nil, fmt.Errorf("start the build sandbox: %w", err)
	}
	b := &builder{sb: sb, rootfs: sb.Rootfs(), log: bd.log(), out: bd.output()}
	if b.tree, err = openTree(b.rootfs); err != nil {
		b.close(ctx)
		return nil, err
	}
	return b, nil
}

// close deletes the sandbox, whatever happened to the build.
func (b *builder) close(ctx context.Context) {
	if b.tree != nil {
		b.tree.Close()
	}
	b.sb.Close(context.WithoutCancel(ctx))
}

// step runs one instruction. After a RUN, every process it left behind
// is killed before the next step: a background process could otherwise
// swap names in the tree while a COPY writes into it from the host.
func (b *builder) step(ctx context.Context, st *buildState, croot *os.Root, in dockerfile.Instruction) error {
	b.log.Debug("build step", "line", in.Line, "instruction", in.Cmd)
	fmt.Fprintf(b.out, "Dockerfile:%d: %s\n", in.Line, shorten(in.Raw, 2000))
	switch in.Cmd {
	case "RUN":
		if err := b.run(ctx, st, in); err != nil {
			return err
		}
		if err := b.sb.KillStrays(ctx); err != nil {
			return fmt.Errorf("%s: RUN: end what it left running: %w", "Dockerfile:"+strconv.Itoa(in.Line), err)
		}
		return nil
	case "COPY", "ADD":
		return b.copy(ctx, st, croot, in)
	case "WORKDIR":
		applyConfig(st, in)
		if err := b.tree.mkdirAll(st.workDir, owner{mode: 0o755, hasMode: true}); err != nil {
			return stepErr(in, errdefs.InvalidArgument, "%v", err)
		}
		return nil
	}
	applyConfig(st, in)
	return nil
}

// maxRunOutput is how much of a failed RUN's output its error shows.
const maxRunOutput = 2048

// run executes a RUN through the agent as the step's user, in its working
// directory, with its environment. A non-zero exit fails the build with
// the line and the end of the output.
func (b *builder) run(ctx context.Context, st *buildState, in dockerfile.Instruction) error {
	who := st.user
	if u, ok := in.Flags["user"]; ok && u != "" {
		who = u // RUN --user: this step only
	}
	user, err := b.runUser(who)
	if err != nil {
		return stepErr(in, errdefs.NotSupported, "%v", err)
	}
	for _, h := range in.Heredocs {
		done, err := b.placeScript(ctx, h)
		if err != nil {
			return stepErr(in, errdefs.ClassOf(err), "place the heredoc script: %v", err)
		}
		defer done()
	}
	out := &tailbuf.Buffer{Max: maxRunOutput}
	w := io.MultiWriter(out, b.out) // b.out never fails
	proc, err := b.sb.Exec(ctx, driver.Command{Args: in.Args, Env: st.runEnv(), Dir: st.dir(), User: user, Stdout: w, Stderr: w})
	if err != nil {
		if c := errdefs.ClassOf(err); c == errdefs.NotFound || c == errdefs.InvalidArgument {
			return stepErr(in, errdefs.InvalidArgument, "%v", err)
		}
		return fmt.Errorf("%s: RUN: %w", "Dockerfile:"+strconv.Itoa(in.Line), err)
	}
	code, err := proc.Wait(ctx)
	if err != nil {
		return fmt.Errorf("%s: RUN: %w", "Dockerfile:"+strconv.Itoa(in.Line), err)
	}
	if code != 0 {
		return errdefs.Errorf(errdefs.InvalidArgument, "Dockerfile:%d: %s: exit status %d; output ends:\n%s", in.Line, shorten(in.Raw, 200), code, tail(out))
	}
	return nil
}

// placeScript puts a RUN's heredoc script where Docker has it for the
// step, dockerfile.PipesDir (in the sandbox's own /dev, a tmpfs, so never
// in the image), mode 0755; done removes it again.
func (b *builder) placeScript(ctx context.Context, h dockerfile.Heredoc) (done func(), err error) {
	p := dockerfile.PipesDir + h.Name
	sh := func(script string, stdin io.Reader) error {
		out := &tailbuf.Buffer{Max: 512}
		proc, err := b.sb.Exec(ctx, driver.Command{Args: []string{"/bin/sh", "-c", script, "sh", p}, Stdin: stdin, Stdout: out, Stderr: out})
		if err != nil {
			return err
		}
		if code, err := proc.Wait(ctx); err != nil || code != 0 {
			return errors.Join(err, errdefs.Errorf(errdefs.InvalidArgument, "/bin/sh exit status %d: %s", code, tail(out)))
		}
		return nil
	}
	if err := sh(`mkdir -p "${1%/*}" && cat >"$1" && chmod 0755 "$1"`, strings.NewReader(h.Data)); err != nil {
		return nil, err
	}
	return func() {
		if err := sh(`rm -f "$1"`, nil); err != nil {
			b.log.Warn("remove the heredoc script", "path", p, "err", err)
		}
	}, nil
}

// runUser maps USER onto a user the agent can switch to: one with an
// /etc/passwd entry in the sandbox as the steps so far left it, with its
// own primary group.
func (b *builder) runUser(spec string) (string, error) {
	if spec == "" || spec == "root" || spec == "0" || spec == "0:0" {
		return "", nil
	}
	refuse := fmt.Errorf("USER %q: this builder runs steps only as users in the image's /etc/passwd (with their own primary group); add the user first", spec)
	name, group, hasGroup := strings.Cut(spec, ":")
	e, found := passwd.Lookup(b.readImageFile("etc/passwd"), name)
	if !found {
		return "", refuse
	}
	if hasGroup {
		g, ok := passwd.ParseID(group)
		if !ok {
			g, ok = passwd.LookupGroup(b.readImageFile("etc/group"), group)
		}
		if !ok || g != e.GID {
			return "", refuse
		}
	}
	if e.UID == 0 {
		return "", nil
	}
	return e.Name, nil
}

// readImageFile reads a file of the sandbox's root as the steps so far
// left it, resolved inside that root.
func (b *builder) readImageFile(name string) []byte {
	return passwd.ReadLayered([]string{b.rootfs}, name)
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// tail is a RUN's output as its error shows it.
func tail(t *tailbuf.Buffer) string {
	if s := strings.TrimSpace(string(t.Bytes())); s != "" {
		return s
	}
	return "(no output)"
}
