package benchstat

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// CPU is the machine's busy time (every CPU's user, nice, system, irq and
// softirq time from /proc/stat) since boot; 0 where /proc/stat cannot be
// read. The difference of two readings over a run is the CPU the run cost
// the whole machine, its sandboxes' processes and runc included, which a
// process's own rusage does not see; on a machine running nothing else it
// is the run's cost.
func CPU() time.Duration {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	if !s.Scan() {
		return 0
	}
	fields := strings.Fields(s.Text())
	if len(fields) < 8 || fields[0] != "cpu" {
		return 0
	}
	var busy int64
	for _, i := range []int{1, 2, 3, 6, 7} { // user nice system irq softirq
		var v int64
		if _, err := fmt.Sscan(fields[i], &v); err != nil {
			return 0
		}
		busy += v
	}
	// USER_HZ is 100 on every Linux the benchmarks run on.
	return time.Duration(busy) * 10 * time.Millisecond
}

// Cores is how many CPUs the machine has online, from /proc/stat.
func Cores() int {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "cpu") && len(l) > 3 && l[3] >= '0' && l[3] <= '9' {
			n++
		}
	}
	return n
}

// ReportCPU reports the machine CPU (from CPU) that a run of n items, conc
// at a time, cost per item, and logs the latency that the sharing of the
// cores alone gives each item: with conc items in flight and every core
// busy, an item holds a core for its own CPU time and waits its turn the
// rest, so by Little's law its latency is near conc * CPU per item / cores
// whatever the code does; only more cores or less CPU per item lower it.
func ReportCPU(b *testing.B, cpu time.Duration, n, conc int, unit string) {
	per := float64(cpu) / float64(time.Millisecond) / float64(max(n, 1))
	b.ReportMetric(per, "machine-cpu-ms/"+unit)
	cores := max(Cores(), 1)
	if conc <= cores {
		b.Logf("machine CPU %.1f ms per %s on %d cores, %d in flight", per, unit, cores, conc)
		return
	}
	b.Logf("machine CPU %.1f ms per %s on %d cores: at %d in flight the cores' sharing alone makes each %s's latency about %.0f ms",
		per, unit, cores, conc, unit, float64(conc)*per/float64(cores))
}
