package opensandbox

import (
	"math"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-sh/berth/sandbox"
)

// Resource names of resourceLimits that berth reads; others (gpu_type,
// vendor extensions) are accepted and ignored, as upstream passes unknown
// names to its runtime.
const (
	ResourceCPU     = "cpu"
	ResourceMemory  = "memory"
	ResourceStorage = "ephemeral-storage"
	ResourceGPU     = "gpu"
	ResourceNvidia  = "nvidia.com/gpu"
)

// ParseResources reads a resourceLimits map in Kubernetes quantity forms
// ("2", "500m", "8192Mi", "2Gi", "20G") into sandbox resources: cores,
// memory and storage in MB (2^20 bytes, rounded up), GPUs. A name left out
// stays zero. Negative or malformed quantities are InvalidArgument.
func ParseResources(limits map[string]string) (sandbox.Resources, error) {
	var res sandbox.Resources
	for name, raw := range limits {
		var dst func(resource.Quantity) error
		switch name {
		case ResourceCPU:
			dst = func(q resource.Quantity) error { res.CPUs = float64(q.MilliValue()) / 1000; return nil }
		case ResourceMemory:
			dst = func(q resource.Quantity) error { return mebibytes(q, &res.MemoryMB) }
		case ResourceStorage:
			dst = func(q resource.Quantity) error { return mebibytes(q, &res.StorageMB) }
		case ResourceGPU, ResourceNvidia:
			dst = func(q resource.Quantity) error {
				if q.Value() > math.MaxInt32 {
					return sandbox.Errorf(sandbox.InvalidArgument, "resourceLimits: %s %q is out of range", name, raw)
				}
				res.GPUs = max(res.GPUs, int(q.Value()))
				return nil
			}
		default:
			continue
		}
		q, err := resource.ParseQuantity(raw)
		if err != nil {
			return res, sandbox.Errorf(sandbox.InvalidArgument, "resourceLimits: %s %q is not a quantity (e.g. \"2\", \"500m\", \"8192Mi\")", name, raw)
		}
		if q.Sign() < 0 {
			return res, sandbox.Errorf(sandbox.InvalidArgument, "resourceLimits: %s %q is negative", name, raw)
		}
		if err := dst(q); err != nil {
			return res, err
		}
	}
	return res, nil
}

// mebibytes stores q in MB, rounded up; more than fits in an int is
// InvalidArgument.
func mebibytes(q resource.Quantity, dst *int) error {
	b, ok := q.AsInt64()
	if !ok {
		b = q.Value() // rounds fractions of a byte up; saturates on overflow
	}
	if b > math.MaxInt32<<20 {
		return sandbox.Errorf(sandbox.InvalidArgument, "resourceLimits: %s is out of range", q.String())
	}
	*dst = int((b + (1<<20 - 1)) >> 20)
	return nil
}
