// Package benchstat holds what berth's benchmarks share to report their
// numbers: percentiles of a sample, the environment variables that size a
// run, and the machine's CPU time a run cost. Import it only from
// benchmarks.
package benchstat

import (
	"fmt"
	"os"
)

// Percentile is the q-th quantile (0..1) of sorted, nearest rank; 0 for an
// empty sample.
func Percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(float64(len(sorted)-1)*q+0.5)]
}

// EnvInt is the positive integer in the environment variable name, else def.
func EnvInt(name string, def int) int {
	var v int
	if _, err := fmt.Sscan(os.Getenv(name), &v); err == nil && v > 0 {
		return v
	}
	return def
}
