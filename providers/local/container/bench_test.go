package container

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Benchmarks report the median in ms as "p50-ms" besides Go's mean ns/op.
// Run: go test ./container -run '^$' -bench . -benchtime 50x

func reportP50(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "p50-ms")
}

// benchRuntimes are the runtimes that work here, each with the three
// seccomp profiles (the filter is compiled by the runtime at every start).
func benchRuntimes(b *testing.B) map[string]Runtime {
	out := map[string]Runtime{}
	for _, bin := range []string{"runc", "crun"} {
		r, err := workingRuntime(b, bin)
		if err != nil {
			b.Log(err)
			continue
		}
		out[bin] = r
		r.Seccomp = SeccompDocker
		out[bin+"-seccomp-docker"] = r
		r.Seccomp = SeccompNone
		out[bin+"-seccomp-none"] = r
	}
	return out
}

// BenchmarkCreate times Create until the runtime has started the init
// (busybox sleep): the runtime-layer part of create-to-first-exec.
func BenchmarkCreate(b *testing.B) {
	needRoot(b)
	for name, r := range benchRuntimes(b) {
		b.Run(name, func(b *testing.B) {
			var ds []time.Duration
			for i := 0; i < b.N; i++ {
				c := testConfig(b)
				t0 := time.Now()
				ct, err := r.Create(context.Background(), c)
				ds = append(ds, time.Since(t0))
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := ct.Delete(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			reportP50(b, ds)
		})
	}
}

// BenchmarkCreateAgentReady times Create plus the first answer of the agent
// (testinit) on its socket: create to first request.
func BenchmarkCreateAgentReady(b *testing.B) {
	needRoot(b)
	r := testRuntime(b)
	var ds []time.Duration
	for i := 0; i < b.N; i++ {
		c, sock := agentConfig(b)
		t0 := time.Now()
		ct, err := r.Create(context.Background(), c)
		if err != nil {
			b.Fatal(err)
		}
		agentGet(b, sock, "/hello")
		ds = append(ds, time.Since(t0))
		b.StopTimer()
		if err := ct.Delete(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	reportP50(b, ds)
}

// BenchmarkDelete times teardown: kill, pidfd wait, runtime delete,
// unmount, cgroup and dir removal.
func BenchmarkDelete(b *testing.B) {
	needRoot(b)
	for name, r := range benchRuntimes(b) {
		b.Run(name, func(b *testing.B) {
			var ds []time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				ct, err := r.Create(context.Background(), testConfig(b))
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				t0 := time.Now()
				if err := ct.Delete(context.Background()); err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(t0))
			}
			reportP50(b, ds)
		})
	}
}

// BenchmarkIdleMemory creates b.N agent containers, keeps them all alive,
// and reports the mean memory charged to each one's memory cgroup (the
// agent's RSS, page cache and kernel memory it caused) and the agent's own
// RSS. Nothing stays resident on the host per container besides that: no
// shim, runc exits after start.
func BenchmarkIdleMemory(b *testing.B) {
	needRoot(b)
	r := testRuntime(b)
	var cts []*Container
	defer func() {
		for _, ct := range cts {
			ct.Delete(context.Background())
		}
	}()
	for i := 0; i < b.N; i++ {
		c, sock := agentConfig(b)
		ct, err := r.Create(context.Background(), c)
		if err != nil {
			b.Fatal(err)
		}
		cts = append(cts, ct)
		agentGet(b, sock, "/hello")
	}
	b.StopTimer()
	var charged, rss float64
	for _, ct := range cts {
		mem, err := os.ReadFile(filepath.Join(ct.CgroupPaths()["memory"], "memory.usage_in_bytes"))
		if err != nil {
			b.Fatal(err)
		}
		charged += float64(atoi(b, string(mem)))
		status, err := os.ReadFile("/proc/" + strconv.Itoa(ct.Pid()) + "/status")
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				rss += float64(atoi(b, strings.TrimSuffix(strings.TrimSpace(v), " kB"))) * 1024
			}
		}
	}
	n := float64(len(cts))
	b.ReportMetric(charged/n/(1<<20), "cgroup-MiB/sandbox")
	b.ReportMetric(rss/n/(1<<20), "agent-rss-MiB/sandbox")
}

// BenchmarkPrepareStart splits create-to-first-request in three: Prepare
// (`runtime create`: mount, cgroups, namespaces, the waiting init), Start
// (`runtime start`) and the agent's (testinit's) first answer after it. A
// pool that prepares ahead saves the first part only.
func BenchmarkPrepareStart(b *testing.B) {
	needRoot(b)
	r := testRuntime(b)
	var prep, start, ready []time.Duration
	for i := 0; i < b.N; i++ {
		c, sock := agentConfig(b)
		t0 := time.Now()
		ct, err := r.Prepare(context.Background(), c)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := ct.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		agentGet(b, sock, "/hello")
		t3 := time.Now()
		prep, start, ready = append(prep, t1.Sub(t0)), append(start, t2.Sub(t1)), append(ready, t3.Sub(t2))
		b.StopTimer()
		if err := ct.Delete(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"prepare", prep}, {"start", start}, {"ready", ready}} {
		slices.Sort(m.d)
		b.ReportMetric(float64(m.d[len(m.d)/2].Microseconds())/1000, m.name+"-p50-ms")
	}
}

// BenchmarkSwitchRoot times SwitchRoot of a container started on a blank
// root into the busybox rootfs: what a pooled sandbox's Create adds.
func BenchmarkSwitchRoot(b *testing.B) {
	needRoot(b)
	r := testRuntime(b)
	lower := busyboxRootfs(b)
	var ds []time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		c, _ := blankConfig(b)
		ct, err := r.Create(context.Background(), c)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		err = ct.SwitchRoot([]string{lower})
		ds = append(ds, time.Since(t0))
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if err := ct.Delete(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	reportP50(b, ds)
}
