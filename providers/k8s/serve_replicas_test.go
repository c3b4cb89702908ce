package k8s_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/syncbuf"
	"github.com/berth-sh/berth/internal/testing/localtest"
	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/providers/k8s"
	"github.com/berth-sh/berth/providers/local/image"
	"github.com/berth-sh/berth/sandbox"
)

// bashImage is the serve tests' "base" template: the node shim's busybox
// with a /bin/bash (the SDKs run every command as /bin/bash -l -c),
// imported into the shim's image store once.
const bashImage = "berth.local/busybox-bash:test"

var bashOnce struct {
	sync.Once
	err error
}

func needBashImage(t *testing.T) {
	t.Helper()
	bashOnce.Do(func() {
		tar := filepath.Join(t.TempDir(), "bash-rootfs.tar")
		if bashOnce.err = localtest.WriteBashRootfs(tar); bashOnce.err != nil {
			return
		}
		st, err := image.Open(localOpts.StateDir, image.Options{})
		if err != nil {
			bashOnce.err = err
			return
		}
		_, bashOnce.err = st.Import(context.Background(), bashImage, tar)
	})
	if bashOnce.err != nil {
		t.Fatal(bashOnce.err)
	}
}

// sdkDir holds the official e2b npm SDK that serve's tests install
// (.ci/run: npm ci there).
const sdkDir = "../../serve/testdata/sdk"

// replica is one `berth serve --backend k8s` process.
type replica struct {
	cmd  *exec.Cmd
	url  string
	out  *syncbuf.Buffer
	dead atomic.Bool
	reqs atomic.Int64
}

// startReplica runs the berth binary's serve verb on the namespace with
// the key file, and waits for the address it prints.
func startReplica(t *testing.T, bin, ns, keys string, env ...string) *replica {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--backend", "k8s", "--addr", "127.0.0.1:0", "--api-keys", keys,
		"--template", "base="+bashImage, "--no-opensandbox", "--log-level", "debug")
	cmd.Env = append(append(os.Environ(), "HOME="+t.TempDir(),
		k8s.EnvKubeconfig+"="+cluster.Kubeconfig, k8s.EnvNamespace+"="+ns), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{cmd: cmd, out: &syncbuf.Buffer{}}
	cmd.Stderr = r.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "export E2B_API_URL="); ok {
				urls <- u
			}
		}
	}()
	select {
	case r.url = <-urls:
	case <-time.After(time.Minute):
		t.Fatalf("berth serve printed no address:\n%s", r.out)
	}
	return r
}

// balancer is the Service in front of the replicas: each request goes to
// the next live replica in turn, so that every sandbox is served by both.
func balancer(t *testing.T, rs []*replica) (*httptest.Server, *http.Transport) {
	tr := &http.Transport{MaxIdleConnsPerHost: 32}
	var next atomic.Int64
	proxy := &httputil.ReverseProxy{
		Transport:     tr,
		FlushInterval: -1, // envd's process output streams
		Rewrite: func(pr *httputil.ProxyRequest) {
			for range rs {
				r := rs[int(next.Add(1))%len(rs)]
				if r.dead.Load() {
					continue
				}
				r.reqs.Add(1)
				u, _ := url.Parse(r.url)
				pr.SetURL(u)
				pr.Out.Host = pr.In.Host
				return
			}
		},
	}
	lb := httptest.NewServer(proxy)
	t.Cleanup(lb.Close)
	return lb, tr
}

// TestServeReplicas is issue 17's `berth serve --backend k8s` with two
// replicas: two processes of the berth binary, stateless, behind a
// round-robin balancer, run the official e2b SDK's scenario
// (serve/testdata/sdk); half way, after the first sandbox's files steps,
// one replica is killed with SIGKILL, and the rest of the scenario (the 5
// MB round trip, list, setTimeout, connect and kill, all of sandboxes made
// while both lived) passes on the other. In pod mode and in agent-sandbox
// mode.
func TestServeReplicas(t *testing.T) {
	t.Run("pod", func(t *testing.T) { serveReplicas(t) })
	t.Run("agent-sandbox", func(t *testing.T) {
		needAgentSandbox(t)
		serveReplicas(t, k8s.EnvMode+"="+string(k8s.ModeAgentSandbox), k8s.EnvWarmPool+"=2")
	})
}

func serveReplicas(t *testing.T, env ...string) {
	needCluster(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the SDK scenario needs Node.js")
	}
	if _, err := os.Stat(filepath.Join(sdkDir, "node_modules", "e2b", "package.json")); err != nil {
		t.Skip("the e2b SDK is not installed: run npm ci in serve/testdata/sdk")
	}
	needBashImage(t)
	ns := namespace(t)
	bin, err := testbin.Berth()
	if err != nil {
		t.Fatal(err)
	}
	const key = "berth_replicas_test_key_0123456789"
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rs := []*replica{startReplica(t, bin, ns, keys, env...), startReplica(t, bin, ns, keys, env...)}
	lb, tr := balancer(t, rs)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	half := filepath.Join(t.TempDir(), "halfway")
	cmd := exec.CommandContext(ctx, node, "scenario.mjs", "scenario")
	cmd.Dir = sdkDir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "SDK=e2b",
		"E2B_API_URL=" + lb.URL, "E2B_SANDBOX_URL=" + lb.URL, "E2B_DOMAIN=localhost", "E2B_API_KEY=" + key,
		"HALFWAY_FILE=" + half}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out syncbuf.Buffer
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var before [2]int64
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		fmt.Fprintln(&out, sc.Text())
		if sc.Text() != "halfway" {
			continue
		}
		before = [2]int64{rs[0].reqs.Load(), rs[1].reqs.Load()}
		// The replica dies as a node's process does: SIGKILL, nothing
		// flushed, nothing deleted.
		_ = rs[0].cmd.Process.Kill()
		rs[0].dead.Store(true)
		tr.CloseIdleConnections()
		if err := os.WriteFile(half, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err = cmd.Wait()
	if err != nil || !strings.Contains(out.String(), "\nPASS\n") {
		t.Fatalf("the SDK scenario over two replicas, one killed half way: %v\n%s\nsurviving replica:\n%s", err, out.String(), tail(rs[1].out))
	}
	for _, want := range []string{"halfway", "ok 5 MB round trip", "ok connect from a second client", "ok kill; kill of an unknown id is false"} {
		if !strings.Contains(out.String(), want+"\n") {
			t.Errorf("no %q in the scenario's output:\n%s", want, out.String())
		}
	}
	after := rs[1].reqs.Load() - before[1]
	t.Logf("requests: replica 1 %d (killed half way), replica 2 %d before the kill and %d after", before[0], before[1], after)
	if before[0] == 0 || before[1] == 0 || after == 0 {
		t.Errorf("both replicas should serve before the kill and the second after it: %v, %d", before, after)
	}
	// Nothing is left: the scenario killed or timed out every sandbox.
	o := options(ns)
	if len(env) > 0 {
		o = claimOptions(t, ns, 0)
	}
	p := sandbox.NewProvider("k8s", openDriver(t, o))
	defer p.Close()
	if infos, err := p.List(ctx, nil); err != nil || len(infos) != 0 {
		t.Errorf("sandboxes left after the scenario: %+v %v", infos, err)
	}
}

// tail is the end of a replica's log, for failures.
func tail(b *syncbuf.Buffer) string {
	s := b.String()
	if len(s) > 4000 {
		s = s[len(s)-4000:]
	}
	return s
}
