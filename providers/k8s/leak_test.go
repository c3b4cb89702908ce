package k8s_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-sh/berth/internal/syncbuf"
	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/providers/k8s"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
)

// sleepyTask writes a Harbor task whose oracle sleeps far past the test,
// with short phase limits (scaled by --timeout-multiplier 0.25 below): the
// runner's TTL is the phases' limits plus a minute.
func sleepyTask(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "tasks", "sleepy")
	for _, d := range []string{"solution", "tests"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"instruction.md":    "Sleep.\n",
		"solution/solve.sh": "#!/bin/sh\nsleep 600\n",
		"tests/test.sh":     "#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n",
		"task.toml": `schema_version = "1.1"
[task]
name = "berth/sleepy"
[agent]
timeout_sec = 80.0
[verifier]
timeout_sec = 20.0
[environment]
docker_image = "` + local.DefaultImage + `"
build_timeout_sec = 20.0
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Dir(dir)
}

// killRunnerMidJob runs `berth run -e k8s -n 2` on the sleepy task and
// kills it with SIGKILL once both trials' pods run, leaving them behind.
func killRunnerMidJob(t *testing.T, ns string, extraEnv ...string) []corev1.Pod {
	t.Helper()
	bin, err := testbin.Berth()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "-p", sleepyTask(t), "-a", "oracle", "-e", "k8s", "-k", "2", "-n", "2", "--timeout-multiplier", "0.25", "-o", t.TempDir())
	cmd.Env = append(append(os.Environ(), "HOME="+t.TempDir(),
		k8s.EnvKubeconfig+"="+cluster.Kubeconfig, k8s.EnvNamespace+"="+ns), extraEnv...)
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, listAll)
		running := 0
		if err == nil {
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning {
					running++
				}
			}
		}
		if running == 2 {
			// The oracle is sleeping in both: kill the runner as an OOM
			// killer or a lost laptop would, with no teardown.
			_ = cmd.Process.Signal(syscall.SIGKILL)
			return pods.Items
		}
		select {
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			t.Fatalf("the runner never had two running trials:\n%s", out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// A runner killed with -9 mid-job leaves its pods, and the TTL reaper
// removes them: a fresh provider (another process's) finds them expired
// by their annotation and deletes them, and their sandboxes go with them.
func TestKilledRunnerTTLReaper(t *testing.T) {
	if raceOn {
		t.Skip("waits out a 2.5-minute TTL; the plain test pass runs it")
	}
	ns := namespace(t)
	left := killRunnerMidJob(t, ns)
	exp, err := time.Parse(time.RFC3339, left[0].Annotations["berth.sh/expires-at"])
	if err != nil {
		t.Fatal(err)
	}
	if wait := time.Until(exp); wait > 3*time.Minute {
		t.Fatalf("the runner's TTL ends in %v; the test expects under 3 minutes", wait)
	}
	d := openDriver(t, options(ns))
	defer d.Close()
	if ids, err := d.Reap(context.Background()); err != nil || len(ids) != 0 {
		t.Fatalf("reap before the TTL: %v %v, want nothing", ids, err)
	}
	time.Sleep(time.Until(exp) + time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ids, err := d.Reap(ctx)
	if err != nil || len(ids) != 2 {
		t.Fatalf("reap after the TTL = %v %v, want both pods", ids, err)
	}
	waitNoPods(t, ns)
	if n := shim.Backed(); n != 0 {
		t.Errorf("the node still runs %d sandboxes", n)
	}
}

// The backstop: with no reaper at all, activeDeadlineSeconds (sized from
// the provider's max lifetime) makes the kubelet, here the node shim, kill
// the sandboxes and fail the pods; Reap then removes the ended pods. The
// runner is a helper process (this test binary) whose sandboxes live 20 s
// at most, since a `berth run` trial's TTL is a minute or more.
func TestKilledRunnerBackstop(t *testing.T) {
	ns := namespace(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), runnerEnv+"="+ns, runnerKubeconfig+"="+cluster.Kubeconfig)
	var out syncbuf.Buffer
	cmd.Stderr = &out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if !strings.HasPrefix(line, "running ") {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the helper runner: %q\n%s", line, out.String())
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, listAll)
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("pods left by the killed runner: %v %v", pods, err)
	}
	if ads := pods.Items[0].Spec.ActiveDeadlineSeconds; ads == nil || *ads != 20 {
		t.Fatalf("activeDeadlineSeconds = %v, want 20", ads)
	}
	for {
		pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, listAll)
		failed := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodFailed && p.Status.Reason == "DeadlineExceeded" {
				failed++
			}
		}
		if err == nil && failed == 2 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the backstop never ended the pods: %v", pods)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if n := shim.Backed(); n != 0 {
		t.Errorf("the node still runs %d sandboxes past the backstop", n)
	}
	d := openDriver(t, options(ns))
	defer d.Close()
	if ids, err := d.Reap(ctx); err != nil || len(ids) != 2 {
		t.Fatalf("reap of the ended pods = %v %v", ids, err)
	}
	waitNoPods(t, ns)
}

// runnerEnv makes the test binary a runner (runnerMain) in namespace $value.
const runnerEnv = "BERTH_K8S_TEST_RUNNER"

// runnerMain creates two sandboxes that live 20 s at most, starts a long
// sleep in each, says so, and waits to be killed.
func runnerMain(kubeconfig string) int {
	ns := os.Getenv(runnerEnv)
	o := k8s.Options{Kubeconfig: kubeconfig, Namespace: ns, MaxLifetime: 20 * time.Second, Dial: k8s.DialPortForward,
		NodeSelector: map[string]string{"berth.sh/node-shim": "true"}, ReadyTimeout: time.Minute}
	ctx := context.Background()
	d, err := k8s.New(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	p := sandbox.NewProvider("k8s", d)
	var ids []string
	for range 2 {
		sb, err := p.Create(ctx, sandbox.Spec{Image: local.DefaultImage, TTL: 20 * time.Second})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if _, err := sb.Exec(ctx, sandbox.Command{Args: []string{"sleep", "600"}}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		ids = append(ids, sb.ID())
	}
	fmt.Println("running", strings.Join(ids, " "))
	select {}
}

// Deleting the namespace mid-job fails the affected trials with an error
// that says the pod went, and the job ends at once instead of waiting out
// the agent's ten-minute limit.
func TestNamespaceDeletedMidJob(t *testing.T) {
	ns := namespace(t)
	bin, err := testbin.Berth()
	if err != nil {
		t.Fatal(err)
	}
	jobs := t.TempDir()
	cmd := exec.Command(bin, "run", "-p", sleepyTask(t), "-a", "oracle", "-e", "k8s", "-k", "2", "-n", "2",
		"--timeout-multiplier", "10", "-o", jobs, "--max-retries", "0")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), k8s.EnvKubeconfig+"="+cluster.Kubeconfig, k8s.EnvNamespace+"="+ns)
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for running := 0; running < 2; {
		pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, listAll)
		running = 0
		if err == nil {
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning {
					running++
				}
			}
		}
		select {
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			t.Fatalf("no two running trials:\n%s", out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	time.Sleep(time.Second) // the oracle is sleeping in both
	deleted := time.Now()
	if err := cluster.Client.CoreV1().Namespaces().Delete(ctx, ns, deleteNow); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("the job still runs a minute after its namespace was deleted:\n%s", out.String())
	}
	t.Logf("the job ended %v after the namespace was deleted:\n%s", time.Since(deleted).Round(time.Millisecond), out.String())
	results, _ := filepath.Glob(filepath.Join(jobs, "*", "sleepy__*", "result.json"))
	if len(results) != 2 {
		t.Fatalf("trial results: %v", results)
	}
	for _, r := range results {
		b, err := os.ReadFile(r)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "pod") || !strings.Contains(string(b), "deleted") {
			t.Errorf("%s does not say the pod was deleted:\n%s", r, b)
		}
		if i := strings.Index(string(b), "exception_message"); i >= 0 {
			t.Logf("%s", b[i:min(len(b), i+400)])
		}
	}
}
