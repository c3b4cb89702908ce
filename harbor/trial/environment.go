package trial

import (
	"cmp"
	"context"
	"errors"
	"os"
	"regexp"
	"time"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/retry"
)

// maxTTL caps the sandbox lifetime of a trial whose phases have no limit.
const maxTTL = 24 * time.Hour

func scaled(base time.Duration, phase, global float64) time.Duration {
	m := phase
	if m <= 0 {
		m = mult(global)
	}
	return time.Duration(float64(base) * m)
}

func pick(override, taskValue time.Duration) time.Duration {
	if override > 0 {
		return override
	}
	return taskValue
}

func (r *run) buildTimeout() time.Duration {
	t := r.o.Timeouts
	return scaled(pick(t.EnvironmentOverride, r.o.Task.BuildTimeout), t.EnvironmentBuild, t.Multiplier)
}

func (r *run) agentSetupTimeout() time.Duration {
	t := r.o.Timeouts
	base := t.AgentSetupDefault
	if base == 0 {
		base = DefaultAgentSetupTimeout
	}
	return scaled(base, t.AgentSetup, t.Multiplier)
}

func (r *run) agentTimeout() time.Duration {
	t := r.o.Timeouts
	return scaled(pick(t.AgentOverride, r.o.Task.AgentTimeout), t.Agent, t.Multiplier)
}

func (r *run) verifierTimeout() time.Duration {
	t := r.o.Timeouts
	return scaled(pick(t.VerifierOverride, r.o.Task.VerifierTimeout), t.Verifier, t.Multiplier)
}

// TTL is how long the trial's sandbox may live: every phase's limit plus the
// provider's margin, so the provider-side deadline always outlasts the trial
// (a sandbox stopped mid-trial is a lost trial) and still removes it if the
// runner dies.
func (r *run) ttl() time.Duration {
	total := time.Duration(0)
	for _, d := range []time.Duration{r.buildTimeout(), r.agentSetupTimeout(), r.agentTimeout(), r.verifierTimeout()} {
		if d <= 0 {
			return maxTTL
		}
		total += d
	}
	return min(total+r.o.TTLMargin+time.Minute, maxTTL)
}

// checkTTL refuses an explicit sandbox lifetime shorter than the trial can
// take: the provider would stop the sandbox mid-trial (Daytona's auto-stop
// firing during a long agent run was a real failure).
func (r *run) checkTTL() error {
	if r.o.TTL == 0 {
		return nil
	}
	if need := r.ttl(); r.o.TTL < need {
		return fail(EnvironmentError, "%w", sandbox.Errorf(sandbox.InvalidArgument,
			"sandbox TTL %v would stop the sandbox mid-trial: the trial's limits plus the provider's margin need %v", r.o.TTL, need))
	}
	return nil
}

var labelUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func (r *run) spec() sandbox.Spec {
	spec := TaskSpec(r.o.Task, r.o.Overrides)
	spec.TTL = cmp.Or(r.o.TTL, r.ttl())
	spec.Labels = map[string]string{
		LabelTrial:    r.o.TrialName,
		LabelTask:     LabelValue(r.o.Task.Name),
		LabelLauncher: "berth-run",
	}
	if r.o.JobID != "" {
		spec.Labels[LabelJob] = r.o.JobID
	}
	return spec
}

// LabelValue makes a task name usable as a label value.
func LabelValue(s string) string { return labelUnsafe.ReplaceAllString(s, "_") }

// TaskSpec is the sandbox t asks for: its image (or its environment/ build
// context), its resources with o's overrides, its environment, working
// directory and network. Runners add labels and a TTL.
func TaskSpec(t *task.Task, o Overrides) sandbox.Spec {
	res := sandbox.Resources{CPUs: t.CPUs, MemoryMB: t.MemoryMB, StorageMB: t.StorageMB, GPUs: t.GPUs}
	if o.CPUs > 0 {
		res.CPUs = o.CPUs
	}
	if o.MemoryMB > 0 {
		res.MemoryMB = o.MemoryMB
	}
	if o.StorageMB > 0 {
		res.StorageMB = o.StorageMB
	}
	spec := sandbox.Spec{
		Image:     t.Image,
		Resources: res,
		Env:       t.Config.Environment.Env,
		WorkDir:   t.Workdir,
	}
	if t.Image == "" {
		spec.Build = &sandbox.Build{ContextDir: t.EnvironmentDir, Dockerfile: "Dockerfile"}
	}
	switch t.Network {
	case task.NetworkNone:
		spec.Network.Mode = sandbox.NetworkNone
	case task.NetworkAllowlist:
		spec.Network = sandbox.Network{Mode: sandbox.NetworkAllowlist, Allow: t.AllowedHosts}
	default:
		spec.Network.Mode = sandbox.NetworkPublic
	}
	return spec
}

func (r *run) startEnvironment(ctx context.Context) error {
	if err := r.checkTTL(); err != nil {
		return err
	}
	return timed(ctx, r.buildTimeout(), EnvironmentStartTimeout, EnvironmentError, func(ctx context.Context) error {
		spec := r.spec()
		img := &layout.Timing{StartedAt: time.Now().UTC()}
		if err := r.o.Provider.PrepareImage(ctx, spec); err != nil {
			return err
		}
		img.FinishedAt = time.Now().UTC()
		r.res.ImageResolution = img
		sb, err := r.create(ctx, spec)
		if err != nil {
			return err
		}
		r.sb = sb
		r.res.SandboxID = sb.ID()
		r.logf("sandbox %s created on %s (image %q, ttl %v)", sb.ID(), r.o.Provider.Name(), spec.Image, spec.TTL)
		return Prepare(ctx, sb, r.o.Task)
	})
}

// Prepare readies a new sandbox for t as a trial's environment phase does:
// the log directories, environment/ copied into the working directory of a
// prebuilt image (as Harbor does), and the task's healthcheck until it
// passes.
func Prepare(ctx context.Context, sb *sandbox.Sandbox, t *task.Task) error {
	for _, d := range []string{agent.AgentLogs, agent.VerifierLogs, agent.ArtifactLogs} {
		if err := sb.MakeDir(ctx, d); err != nil && !errors.Is(err, sandbox.ErrAlreadyExists) {
			return err
		}
	}
	if t.Image != "" && t.EnvironmentDir != "" && t.Workdir != "" && hasFiles(t.EnvironmentDir) {
		if err := sb.UploadDir(ctx, t.EnvironmentDir, t.Workdir); err != nil {
			return err
		}
	}
	return healthcheck(ctx, sb, t)
}

func hasFiles(dir string) bool {
	ents, err := os.ReadDir(dir)
	return err == nil && len(ents) > 0
}

// healthcheck runs the task's declared healthcheck until it passes.
func healthcheck(ctx context.Context, sb *sandbox.Sandbox, t *task.Task) error {
	hc := t.Config.Environment.Healthcheck
	if hc == nil || hc.Command == "" {
		return nil
	}
	interval, timeout, retries := 5*time.Second, 30*time.Second, 3
	if hc.IntervalSec != nil {
		interval = time.Duration(*hc.IntervalSec * float64(time.Second))
	}
	if hc.TimeoutSec != nil {
		timeout = time.Duration(*hc.TimeoutSec * float64(time.Second))
	}
	if hc.Retries != nil {
		retries = *hc.Retries
	}
	if hc.StartPeriodSec != nil {
		if err := retry.Sleep(ctx, time.Duration(*hc.StartPeriodSec*float64(time.Second))); err != nil {
			return err
		}
	}
	var last error
	for i := 0; i <= retries; i++ {
		code, out, err := runTail(ctx, sb, sandbox.Command{Args: []string{"sh", "-c", hc.Command}, Dir: t.Workdir, Timeout: timeout}, 512)
		if err == nil && code == 0 {
			return nil
		}
		last = err
		if err == nil {
			last = sandbox.Errorf(sandbox.Unknown, "healthcheck exited %d: %s", code, out)
		}
		if err := retry.Sleep(ctx, interval); err != nil {
			return err
		}
	}
	return fail(EnvironmentError, "healthcheck %q failed %d times: %w", hc.Command, retries+1, last)
}

func (r *run) create(ctx context.Context, spec sandbox.Spec) (*sandbox.Sandbox, error) {
	if r.o.Gate == nil {
		return r.o.Provider.Create(ctx, spec)
	}
	sb, release, err := r.o.Gate.Create(ctx, r.o.Provider, spec)
	r.release = release
	return sb, err
}
