package types

import "time"

// ResourceMode says how a provider applies Spec.Resources.
type ResourceMode string

// Resource modes.
const (
	ResourcesLimits   ResourceMode = "limits"   // hard caps
	ResourcesRequests ResourceMode = "requests" // scheduling requests; the sandbox may burst
	ResourcesBoth     ResourceMode = "both"     // requests by default, limits when Spec asks
)

// Capabilities is what a provider can do, as plain data that tests, the
// runner and the CLI read.
type Capabilities struct {
	ResourceMode ResourceMode `json:"resource_mode"`
	// Networks lists the network modes the provider can enforce.
	Networks []NetworkMode `json:"networks"`
	// BuildImage: the provider builds Spec.Build contexts.
	BuildImage bool `json:"build_image"`
	// Pause: sandboxes can be paused and resumed.
	Pause bool `json:"pause"`
	// Snapshot: a sandbox's file system can be saved as an image.
	Snapshot bool `json:"snapshot"`
	// GPUs: Spec.Resources.GPUs is honoured.
	GPUs bool `json:"gpus"`
	// MaxTTL is the longest TTL the provider accepts; zero means no limit.
	MaxTTL time.Duration `json:"max_ttl,omitempty"`
}

// Supports reports whether mode is in c.Networks.
func (c Capabilities) Supports(mode NetworkMode) bool {
	for _, m := range c.Networks {
		if m == mode {
			return true
		}
	}
	return false
}
