package driver

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
//
// There is one source for it: the driver. The first group is facts that
// only the driver can state. The second group follows from the optional
// interfaces of package sandbox/driver and is filled by driver.Derive from
// the driver's own types, never written by hand: a registry entry or a
// driver cannot claim a call that is not there.
type Capabilities struct {
	ResourceMode ResourceMode `json:"resource_mode"`
	// Networks lists the network modes the provider can enforce.
	Networks []NetworkMode `json:"networks"`
	// BuildImage: the provider builds Spec.Build contexts.
	BuildImage bool `json:"build_image"`
	// GPUs: Spec.Resources.GPUs is honoured.
	GPUs bool `json:"gpus"`
	// Storage: Spec.Resources.StorageMB is enforced as a disk limit.
	Storage bool `json:"storage"`
	// MaxTTL is the longest TTL the provider accepts; zero means no limit.
	MaxTTL time.Duration `json:"max_ttl,omitempty"`
	// MinTimeout is the shortest deadline SetTimeout can set; shorter ones
	// are rounded up to it (Daytona counts whole minutes). Zero: a second.
	MinTimeout time.Duration `json:"min_timeout,omitempty"`
	// Ports lists the protocols Endpoint exposes. The driver states them;
	// Derive empties the list when its handles have no Endpointer.
	Ports []PortProtocol `json:"ports,omitempty"`
	// PortsAtCreate: Endpoint serves only the ports declared in
	// Spec.Ports (Modal opens its tunnels at create).
	PortsAtCreate bool `json:"ports_at_create,omitempty"`
	// SharedState: sandboxes, their labels and TTLs live where every
	// process of the provider sees them at once (a cluster's objects), so
	// berth serve replicas can keep no state of their own.
	SharedState bool `json:"shared_state,omitempty"`

	// Derived from the driver's interfaces (driver.Derive).

	// SetTimeout: a sandbox's deadline moves after create (TimeoutSetter).
	SetTimeout bool `json:"set_timeout"`
	// Signal: a running command can be signalled (Signaler).
	Signal bool `json:"signal"`
	// Pause: sandboxes can be paused and resumed (Pauser).
	Pause bool `json:"pause"`
	// Snapshot: a sandbox's file system can be saved as an image
	// (Snapshotter).
	Snapshot bool `json:"snapshot"`
	// Fork: a running sandbox can be copied into a new one (Forker).
	Fork bool `json:"fork"`
	// TreeUpload: an uploaded tree is unpacked in one call, symlinks
	// included (TreeUploader); without it trees go file by file and links
	// are refused.
	TreeUpload bool `json:"tree_upload"`
	// TreeDownload: a tree is archived in one call (TreeDownloader);
	// without it the tree is walked file by file (links still travel).
	TreeDownload bool `json:"tree_download"`
	// Envd: sandboxes answer the envd protocol themselves (EnvdServer).
	Envd bool `json:"envd"`
	// PrepareImage: images can be fetched or built ahead of create
	// (ImagePreparer).
	PrepareImage bool `json:"prepare_image"`
	// Reap: the provider removes what dead sandboxes left (Reaper).
	Reap bool `json:"reap"`
	// DialPort: a connection to a port inside the sandbox is carried by
	// the provider's own channel (PortDialer).
	DialPort bool `json:"dial_port"`
	// Forward: a host address can be made reachable inside the sandbox
	// at 127.0.0.1:PORT, even without a network (Forwarder).
	Forward bool `json:"forward"`
}

// ExposesPorts reports whether Endpoint serves proto (c.Ports).
func (c Capabilities) ExposesPorts(proto PortProtocol) bool {
	if proto == "" {
		proto = PortHTTP
	}
	for _, p := range c.Ports {
		if p == proto {
			return true
		}
	}
	return false
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
