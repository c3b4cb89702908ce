package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/providers/local/image"
	"github.com/berth-sh/berth/sandbox"
)

// Side by side with plain runc: the same busybox layers, the same overlay
// per container, the same namespaces (pid, mount, uts, ipc, net, cgroup)
// and pids limit, driven the way a script would drive runc: `runc run
// --detach` of `sleep`, `runc exec`, `runc kill` + wait + `runc delete`.
// berth's arm goes through the sandbox API (sandbox.Provider over the
// local driver). Each loop alternates the two arms, so both see the same
// host load (and each other's aftermath: a runc exec's processes are still
// being torn down when berth's exec starts, so berth's exec is faster alone,
// BenchmarkExecRoundTrip). The BENCHMARKS.md table comes from one run:
//
//	go test ./providers/local -run '^$' -bench 'VsRunc|IdleSandboxes|CreateToFirstExec$|CreateToFirstExecPool$|ExecRoundTrip|^BenchmarkTeardown' -benchtime 200x -timeout 30m

// runcBaseline makes plain runc containers of the default image's layers.
type runcBaseline struct {
	root, dir string // runc --root, bundles
	lowerdir  string // overlay lowerdir option, top layer first
	spec      map[string]any
	n         atomic.Int64
	mu        sync.Mutex
	live      map[*runcCt]bool // started, not stopped: removed at cleanup
}

type runcCt struct {
	id, dir string
	pidfd   int
	run     time.Duration // `runc run --detach` alone
}

// newRuncBaseline prepares bundles under the tests' state dir (so that
// TestMain's leftover check covers their mounts) with cgroups under the
// tests' cgroup parent, and the config `runc spec` writes, adjusted.
func newRuncBaseline(b *testing.B, p *sandbox.Provider) *runcBaseline {
	b.Helper()
	ctx := context.Background()
	if err := p.PrepareImage(ctx, benchSpec); err != nil {
		b.Fatal(err)
	}
	st, err := image.Open(stateDir, image.Options{})
	if err != nil {
		b.Fatal(err)
	}
	img, err := st.Resolve(ctx, local.DefaultImage)
	if err != nil {
		b.Fatal(err)
	}
	layers := slices.Clone(img.Layers)
	slices.Reverse(layers)
	r := &runcBaseline{
		root:     filepath.Join(stateDir, "runc-baseline", "root"),
		dir:      filepath.Join(stateDir, "runc-baseline", "bundles"),
		lowerdir: strings.Join(layers, ":"),
		live:     map[*runcCt]bool{},
	}
	b.Cleanup(r.cleanup)
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		b.Fatal(err)
	}
	tmp := b.TempDir()
	if out, err := exec.Command("runc", "spec", "--bundle", tmp).CombinedOutput(); err != nil {
		b.Fatalf("runc spec: %v: %s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(tmp, "config.json"))
	if err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal(raw, &r.spec); err != nil {
		b.Fatal(err)
	}
	proc := r.spec["process"].(map[string]any)
	proc["terminal"] = false
	proc["args"] = []string{"sleep", "1000000"}
	delete(proc, "rlimits") // berth sets none either
	lin := r.spec["linux"].(map[string]any)
	lin["namespaces"] = []map[string]string{
		{"type": "pid"}, {"type": "mount"}, {"type": "uts"}, {"type": "ipc"}, {"type": "network"}, {"type": "cgroup"},
	}
	res := lin["resources"].(map[string]any)
	res["pids"] = map[string]any{"limit": local.DefaultPids}
	return r
}

// start is `runc run --detach` of sleep on a fresh overlay.
func (r *runcBaseline) start() (*runcCt, error) {
	id := fmt.Sprintf("base-%d-%d", os.Getpid(), r.n.Add(1))
	dir := filepath.Join(r.dir, id)
	for _, d := range []string{"upper", "work", "rootfs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	rootfs := filepath.Join(dir, "rootfs")
	opts := "lowerdir=" + r.lowerdir + ",upperdir=" + filepath.Join(dir, "upper") + ",workdir=" + filepath.Join(dir, "work")
	if err := unix.Mount("overlay", rootfs, "overlay", 0, opts); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("overlay: %w", err)
	}
	fail := func(err error) (*runcCt, error) {
		if unix.Unmount(rootfs, unix.MNT_DETACH) == nil {
			os.RemoveAll(dir)
		}
		return nil, err
	}
	r.mu.Lock()
	r.spec["root"] = map[string]any{"path": rootfs}
	r.spec["linux"].(map[string]any)["cgroupsPath"] = cgroupParent + "/" + id
	cfg, err := json.Marshal(r.spec)
	r.mu.Unlock()
	if err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o600); err != nil {
		return fail(err)
	}
	pidFile := filepath.Join(dir, "pid")
	// Output goes to a file: runc's init inherits it, and on a pipe the
	// wait for runc's output would last as long as the container.
	logPath := filepath.Join(dir, "run.log")
	log, err := os.Create(logPath)
	if err != nil {
		return fail(err)
	}
	run := exec.Command("runc", "--root", r.root, "run", "--detach", "--bundle", dir, "--pid-file", pidFile, id)
	run.Stdout, run.Stderr = log, log
	t0 := time.Now()
	err = run.Run()
	took := time.Since(t0)
	log.Close()
	if err != nil {
		out, _ := os.ReadFile(logPath)
		exec.Command("runc", "--root", r.root, "delete", "--force", id).Run()
		return fail(fmt.Errorf("runc run: %w: %s", err, out))
	}
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		return fail(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return fail(err)
	}
	// The init is our child now (local.New made this process a
	// subreaper); the pidfd keeps the orphan reaper off it.
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fail(err)
	}
	ct := &runcCt{id: id, dir: dir, pidfd: fd, run: took}
	r.mu.Lock()
	r.live[ct] = true
	r.mu.Unlock()
	return ct, nil
}

// exec is `runc exec ID true`, to its exit.
func (r *runcBaseline) exec(ct *runcCt) error {
	if out, err := exec.Command("runc", "--root", r.root, "exec", ct.id, "true").CombinedOutput(); err != nil {
		return fmt.Errorf("runc exec: %w: %s", err, out)
	}
	return nil
}

// stop is `runc kill KILL`, a pidfd wait for the init, `runc delete`, then
// the overlay and the bundle go.
func (r *runcBaseline) stop(ct *runcCt) error {
	if out, err := exec.Command("runc", "--root", r.root, "kill", ct.id, "KILL").CombinedOutput(); err != nil {
		return fmt.Errorf("runc kill: %w: %s", err, out)
	}
	// SIGCHLD (this process reaps) interrupts the waits: retry them.
	for {
		_, err := unix.Poll([]unix.PollFd{{Fd: int32(ct.pidfd), Events: unix.POLLIN}}, 30_000)
		if err == nil {
			break
		}
		if err != unix.EINTR {
			return err
		}
	}
	for {
		err := unix.Waitid(unix.P_PIDFD, ct.pidfd, nil, unix.WEXITED, nil)
		if err == nil {
			break
		}
		if err != unix.EINTR {
			return fmt.Errorf("wait for the init: %w", err)
		}
	}
	unix.Close(ct.pidfd)
	if out, err := exec.Command("runc", "--root", r.root, "delete", ct.id).CombinedOutput(); err != nil {
		return fmt.Errorf("runc delete: %w: %s", err, out)
	}
	r.mu.Lock()
	delete(r.live, ct)
	r.mu.Unlock()
	if err := unix.Unmount(filepath.Join(ct.dir, "rootfs"), 0); err != nil {
		return err
	}
	return os.RemoveAll(ct.dir)
}

// cleanup removes what a failed benchmark left: containers (their init is
// reaped through the pidfd), overlays, bundles.
func (r *runcBaseline) cleanup() {
	for ct := range r.live {
		exec.Command("runc", "--root", r.root, "delete", "--force", ct.id).Run()
		unix.Waitid(unix.P_PIDFD, ct.pidfd, nil, unix.WEXITED, nil)
		unix.Close(ct.pidfd)
	}
	// Never remove a bundle whose overlay is still mounted.
	ents, _ := os.ReadDir(r.dir)
	for _, e := range ents {
		err := unix.Unmount(filepath.Join(r.dir, e.Name(), "rootfs"), unix.MNT_DETACH)
		if err != nil && err != unix.EINVAL && err != unix.ENOENT {
			return
		}
	}
	os.RemoveAll(filepath.Dir(r.root))
}

// must fails the benchmark on err.
func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// startB is start for the benchmark goroutine.
func (r *runcBaseline) startB(b *testing.B) *runcCt {
	b.Helper()
	ct, err := r.start()
	must(b, err)
	return ct
}

// armPause is the quiet time before each timed arm of BenchmarkVsRunc's
// create and teardown; execBlock is how many execs of one arm run back to
// back.
const (
	armPause  = 10 * time.Millisecond
	execBlock = 20
)

// timeN times n calls of f, one by one.
func timeN(n int, f func()) []time.Duration {
	ds := make([]time.Duration, n)
	for i := range ds {
		t0 := time.Now()
		f()
		ds[i] = time.Since(t0)
	}
	return ds
}

// BenchmarkVsRunc times berth (through the sandbox API) and plain runc in
// the same loop, alternating which goes first. create-to-first-exec: berth
// Create + Run(true) vs overlay + `runc run --detach` + `runc exec true`;
// exec: Run(true) vs `runc exec true` on a running one; teardown: Delete
// vs kill + wait + delete + unmount + remove.
func BenchmarkVsRunc(b *testing.B) {
	p := benchProvider(b)
	r := newRuncBaseline(b, p)
	ctx := context.Background()
	berthCreate := func() *sandbox.Sandbox {
		sb, err := p.Create(ctx, benchSpec)
		if err != nil {
			b.Fatal(err)
		}
		return sb
	}
	berthTrue := func(sb *sandbox.Sandbox) {
		if res, err := sb.Run(ctx, trueCmd); err != nil || res.ExitCode != 0 {
			b.Fatal(res, err)
		}
	}
	berthDelete := func(sb *sandbox.Sandbox) {
		if err := sb.Delete(ctx); err != nil {
			b.Fatal(err)
		}
		sb.Close()
	}
	// timeBoth runs the two arms of iteration i in alternating order, each
	// after a pause off the clock: a container's teardown goes on in the
	// kernel after the call returns (namespaces, cgroups), and on two cores
	// it slowed whichever arm came next.
	timeBoth := func(i int, berth, runc func()) (db, dr time.Duration) {
		arms := []func() time.Duration{
			func() time.Duration { t0 := time.Now(); berth(); db = time.Since(t0); return db },
			func() time.Duration { t0 := time.Now(); runc(); dr = time.Since(t0); return dr },
		}
		if i%2 == 1 {
			slices.Reverse(arms)
		}
		for _, a := range arms {
			time.Sleep(armPause) // outside both arms' own clocks
			a()
		}
		return db, dr
	}

	// createArms times berth's create + first exec on p against runc's
	// run + exec, one pair at a time; ready runs off the clock first.
	createArms := func(b *testing.B, p *sandbox.Provider, ready func()) (dbs, drs, runs []time.Duration) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			ready()
			b.StartTimer()
			var sb *sandbox.Sandbox
			var ct *runcCt
			db, dr := timeBoth(i,
				func() {
					var err error
					if sb, err = p.Create(ctx, benchSpec); err != nil {
						b.Fatal(err)
					}
					berthTrue(sb)
				},
				func() { ct = r.startB(b); must(b, r.exec(ct)) })
			dbs, drs, runs = append(dbs, db), append(drs, dr), append(runs, ct.run)
			b.StopTimer()
			berthDelete(sb)
			must(b, r.stop(ct))
			b.StartTimer()
		}
		return dbs, drs, runs
	}

	b.Run("create-to-first-exec", func(b *testing.B) {
		dbs, drs, runs := createArms(b, p, func() {})
		reportPercentiles(b, "berth-", dbs)
		reportPercentiles(b, "runc-", drs)
		// The floor under both: runc's own start, without the overlay or
		// the exec.
		reportPercentiles(b, "runc-run-only-", runs)
	})

	// berth as its long-running launchers run it: the pool has a
	// sandbox ready (refilled off the clock), which takes any image.
	b.Run("create-to-first-exec-pooled", func(b *testing.B) {
		pd := openPooled(b, local.Pool{Size: 1})
		warm(b, pd, benchSpec)
		dbs, drs, _ := createArms(b, sandbox.NewProvider("local", pd), func() {
			if _, err := local.PoolReady(ctx, pd); err != nil {
				b.Fatal(err)
			}
		})
		if n := local.PoolHanded(pd); n != b.N {
			b.Fatalf("%d of %d creates took a ready sandbox", n, b.N)
		}
		reportPercentiles(b, "berth-", dbs)
		reportPercentiles(b, "runc-", drs)
	})

	b.Run("exec", func(b *testing.B) {
		sb := berthCreate()
		defer berthDelete(sb)
		ct := r.startB(b)
		defer func() { must(b, r.stop(ct)) }()
		berthTrue(sb) // warm the connection
		must(b, r.exec(ct))
		// In blocks of execBlock back to back, the arms alternating by
		// block: each exec then follows one of its own kind, as in a
		// command loop, not a runc exec still exiting or an idle pause
		// (a halted vCPU's wake-up alone cost berth's 1 ms exec 0.4 ms).
		var dbs, drs []time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i += execBlock {
			n := min(execBlock, b.N-i)
			arms := []func(){
				func() { dbs = append(dbs, timeN(n, func() { berthTrue(sb) })...) },
				func() { drs = append(drs, timeN(n, func() { must(b, r.exec(ct)) })...) },
			}
			if (i/execBlock)%2 == 1 {
				slices.Reverse(arms)
			}
			for _, a := range arms {
				a()
			}
		}
		b.StopTimer()
		reportPercentiles(b, "berth-", dbs)
		reportPercentiles(b, "runc-", drs)
	})

	b.Run("teardown", func(b *testing.B) {
		var dbs, drs []time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			sb := berthCreate()
			ct := r.startB(b)
			b.StartTimer()
			db, dr := timeBoth(i, func() { berthDelete(sb) }, func() { must(b, r.stop(ct)) })
			dbs, drs = append(dbs, db), append(drs, dr)
		}
		reportPercentiles(b, "berth-", dbs)
		reportPercentiles(b, "runc-", drs)
	})
}

// BenchmarkIdleSandboxes keeps n sandboxes alive at once, each having run
// one command, and reports what an idle one costs the host, beside n plain
// runc containers of sleep: the memory cgroup charge (the agent's memory,
// the page cache and kernel memory it caused), the agent's RSS and PSS,
// and the fall in the host's MemAvailable while they are all alive (the
// widest measure: it also counts the overlay, runtime state and page
// tables; other load on the host moves it too). Creates run on as many
// workers as CPUs; a create that fails ends the wave and is reported, so
// the 500 run says how far this host gets. Each size is one wave, whatever
// b.N is.
func BenchmarkIdleSandboxes(b *testing.B) {
	p := benchProvider(b)
	r := newRuncBaseline(b, p)
	for _, n := range []int{200, 500} {
		// One wave whatever b.N is (so that this runs in the same go test
		// invocation as BenchmarkVsRunc's -benchtime 200x): the testing
		// package calls a sub-benchmark with b.N = 1 and again with the
		// -benchtime count, and the second call reports the first's wave.
		var once sync.Once
		var metrics map[string]float64
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			once.Do(func() { metrics = idleWave(b, p, r, n) })
			for unit, v := range metrics {
				b.ReportMetric(v, unit)
			}
		})
	}
}

// idleWave is one round of BenchmarkIdleSandboxes.
func idleWave(b *testing.B, p *sandbox.Provider, r *runcBaseline, n int) map[string]float64 {
	m := map[string]float64{}
	ctx := context.Background()
	workers := runtime.NumCPU()
	b.Logf("load average before: %s", loadAvg())

	// berth
	avail0 := memAvailable(b)
	sbs := make([]*sandbox.Sandbox, n)
	times := make([]time.Duration, n)
	var failed atomic.Int64
	var firstErr atomic.Value
	parallelFor(n, workers, func(i int) {
		if failed.Load() > 0 {
			return
		}
		t0 := time.Now()
		sb, err := p.Create(ctx, benchSpec)
		if err == nil {
			var res sandbox.Result
			if res, err = sb.Run(ctx, trueCmd); err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("true: exit %d", res.ExitCode)
			}
			sbs[i] = sb
		}
		if err != nil {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, fmt.Sprintf("sandbox %d: %v", i, err))
			return
		}
		times[i] = time.Since(t0)
	})
	var alive []*sandbox.Sandbox
	var ok []time.Duration
	for i, sb := range sbs {
		if sb != nil {
			alive = append(alive, sb)
			if times[i] > 0 {
				ok = append(ok, times[i])
			}
		}
	}
	if e := firstErr.Load(); e != nil {
		b.Logf("berth: %d of %d alive; first failure: %v", len(alive), n, e)
	}
	time.Sleep(2 * time.Second) // let the agents settle after their exec
	avail1 := memAvailable(b)
	var charge, rss, pss, threads float64
	for _, sb := range alive {
		c, _ := sandboxCgroupFile(b, sb.ID(), "memory.usage_in_bytes")
		if c == "" {
			c, _ = sandboxCgroupFile(b, sb.ID(), "memory.current")
		}
		v, _ := strconv.ParseFloat(c, 64)
		charge += v
		for _, pid := range procsIn(sb.ID()) {
			if nsPid(pid) == 1 {
				st := procKB(pid, "smaps_rollup", "Rss:", "Pss:")
				rss += st[0] * 1024
				pss += st[1] * 1024
				threads += procKB(pid, "status", "Threads:")[0]
			}
		}
	}
	k := float64(len(alive))
	b.Logf("berth: %d alive; MemAvailable %d MiB before, %d MiB with them alive", len(alive), avail0>>20, avail1>>20)
	var dels []time.Duration
	var mu sync.Mutex
	parallelFor(len(alive), workers, func(i int) {
		t0 := time.Now()
		if err := alive[i].Delete(ctx); err != nil {
			b.Error(err)
		}
		d := time.Since(t0)
		alive[i].Close()
		mu.Lock()
		dels = append(dels, d)
		mu.Unlock()
	})
	m["berth-alive"] = k
	if k > 0 {
		m["berth-cgroup-MiB/sb"] = charge / k / (1 << 20)
		m["berth-agent-rss-MiB/sb"] = rss / k / (1 << 20)
		m["berth-agent-pss-MiB/sb"] = pss / k / (1 << 20)
		m["berth-host-MiB/sb"] = float64(avail0-avail1) / k / (1 << 20)
		m["berth-agent-threads"] = threads / k
		putPercentiles(m, "berth-create-busy-", ok)
		putPercentiles(m, "berth-delete-busy-", dels)
	}

	// runc, the same count
	time.Sleep(2 * time.Second)
	avail0 = memAvailable(b)
	cts := make([]*runcCt, n)
	parallelFor(n, workers, func(i int) {
		ct, err := r.start()
		if err != nil {
			b.Error(err)
		}
		cts[i] = ct
	})
	time.Sleep(2 * time.Second)
	avail1 = memAvailable(b)
	charge = 0
	started := 0.0
	for _, ct := range cts {
		if ct == nil {
			continue
		}
		started++
		c, _ := sandboxCgroupFile(b, ct.id, "memory.usage_in_bytes")
		if c == "" {
			c, _ = sandboxCgroupFile(b, ct.id, "memory.current")
		}
		v, _ := strconv.ParseFloat(c, 64)
		charge += v
	}
	parallelFor(n, workers, func(i int) {
		if cts[i] != nil {
			if err := r.stop(cts[i]); err != nil {
				b.Error(err)
			}
		}
	})
	m["runc-alive"] = started
	if started > 0 {
		m["runc-cgroup-MiB/ct"] = charge / started / (1 << 20)
		m["runc-host-MiB/ct"] = float64(avail0-avail1) / started / (1 << 20)
	}
	b.Logf("load average after: %s", loadAvg())
	return m
}

// putPercentiles is reportPercentiles into m.
func putPercentiles(m map[string]float64, prefix string, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	ms := func(x time.Duration) float64 { return float64(x.Microseconds()) / 1000 }
	m[prefix+"p50-ms"] = ms(d[len(d)/2])
	m[prefix+"p95-ms"] = ms(d[(len(d)*95)/100])
}

// parallelFor calls f(0..n-1) on w goroutines.
func parallelFor(n, w int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(i)
			}
		}()
	}
	wg.Wait()
}

// nsPid is the process's pid in its own (innermost) pid namespace.
func nsPid(pid int) int {
	v := procKB(pid, "status", "NSpid:")
	return int(v[0])
}

// procKB reads the first number after each key in /proc/PID/file (the
// last number, for NSpid).
func procKB(pid int, file string, keys ...string) []float64 {
	out := make([]float64, len(keys))
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		for i, k := range keys {
			if v, ok := strings.CutPrefix(line, k); ok {
				f := strings.Fields(v)
				if len(f) == 0 {
					continue
				}
				pick := f[0]
				if k == "NSpid:" {
					pick = f[len(f)-1]
				}
				out[i], _ = strconv.ParseFloat(pick, 64)
			}
		}
	}
	return out
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(b))
}
