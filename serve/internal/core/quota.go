package core

import (
	"fmt"
	"math"

	"github.com/berth-sh/berth/sandbox"
)

// DefaultResources are the limits of every sandbox the server creates when
// Options.Resources leaves a field zero: one core, 1 GiB of memory, 4 GiB
// of disk and 512 processes. A key holder cannot ask for more (the E2B
// create call has no resource fields); the operator changes them.
var DefaultResources = sandbox.Resources{CPUs: 1, MemoryMB: 1024, StorageMB: 4096, PIDs: 512}

// usage is what one key holds: sandboxes (live and being created) and the
// sum of their resources.
type usage struct {
	n         int
	cpus      float64
	memoryMB  int
	storageMB int
	pids      int64
}

func (u usage) plus(r sandbox.Resources, sign int) usage {
	u.n += sign
	u.cpus += float64(sign) * r.CPUs
	u.memoryMB += sign * r.MemoryMB
	u.storageMB += sign * r.StorageMB
	u.pids += int64(sign) * r.PIDs
	return u
}

// over says which ceiling u passes, or "" when it passes none.
func (u usage) over(maxN int, ceil sandbox.Resources) string {
	switch {
	case u.n > maxN:
		return fmt.Sprintf("%d live sandboxes, the most this server allows", maxN)
	case ceil.CPUs > 0 && u.cpus > ceil.CPUs+1e-9:
		return fmt.Sprintf("sandboxes of %g cpus in all, over its ceiling of %g", u.cpus, ceil.CPUs)
	case ceil.MemoryMB > 0 && u.memoryMB > ceil.MemoryMB:
		return fmt.Sprintf("sandboxes of %d MB of memory in all, over its ceiling of %d MB", u.memoryMB, ceil.MemoryMB)
	case ceil.StorageMB > 0 && u.storageMB > ceil.StorageMB:
		return fmt.Sprintf("sandboxes of %d MB of disk in all, over its ceiling of %d MB", u.storageMB, ceil.StorageMB)
	case ceil.PIDs > 0 && u.pids > ceil.PIDs:
		return fmt.Sprintf("sandboxes of %d processes in all, over its ceiling of %d", u.pids, ceil.PIDs)
	}
	return ""
}

// Defaulted is r with its zero cpus, memory, disk and pids taken from d,
// as hard limits.
func Defaulted(r, d sandbox.Resources) sandbox.Resources {
	if r.CPUs == 0 {
		r.CPUs = d.CPUs
	}
	if r.MemoryMB == 0 {
		r.MemoryMB = d.MemoryMB
	}
	if r.StorageMB == 0 {
		r.StorageMB = d.StorageMB
	}
	if r.PIDs == 0 {
		r.PIDs = d.PIDs
	}
	r.Limits = true
	return r
}

// fillResources applies DefaultResources to the zero fields of r, and the
// key ceiling's zero fields become max sandboxes times the sandbox's (so
// that by default only the count binds).
func fillResources(r, ceil sandbox.Resources, maxN int) (sandbox.Resources, sandbox.Resources, error) {
	if r.CPUs < 0 || r.MemoryMB < 0 || r.StorageMB < 0 || r.PIDs < 0 || r.GPUs != 0 ||
		ceil.CPUs < 0 || ceil.MemoryMB < 0 || ceil.StorageMB < 0 || ceil.PIDs < 0 {
		return r, ceil, sandbox.Errorf(sandbox.InvalidArgument, "serve: resources and key ceilings must be positive (and no GPUs): %+v, %+v", r, ceil)
	}
	r = Defaulted(r, DefaultResources)
	if ceil.CPUs == 0 {
		ceil.CPUs = float64(maxN) * r.CPUs
	}
	if ceil.MemoryMB == 0 {
		ceil.MemoryMB = maxN * r.MemoryMB
	}
	if ceil.StorageMB == 0 {
		ceil.StorageMB = maxN * r.StorageMB
	}
	if ceil.PIDs == 0 {
		ceil.PIDs = int64(maxN) * r.PIDs
	}
	if over := (usage{}).plus(r, 1).over(maxN, ceil); over != "" {
		return r, ceil, sandbox.Errorf(sandbox.InvalidArgument, "serve: one sandbox's resources already pass a key's ceiling (%s)", over)
	}
	return r, ceil, nil
}

// OverCeiling says which of ceil's limits one sandbox of res alone passes,
// or "".
func OverCeiling(res, ceil sandbox.Resources) string {
	return (usage{}).plus(res, 1).over(math.MaxInt, ceil)
}
