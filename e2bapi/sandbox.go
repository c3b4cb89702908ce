package e2bapi

import "time"

// SandboxState is SandboxState.
const (
	StateRunning = "running"
	StatePaused  = "paused"
)

// Error is the body of every non-2xx answer. The SDKs read the code from
// it: a 404 without {"code":404} makes kill() throw instead of returning
// false.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// NewSandbox is the body of POST /sandboxes and /v2/sandboxes. Secure
// goes on v1 only (v2 dropped it); the v2 route's timeout is optional
// (the server's default is 300 s, v1's 15 s).
type NewSandbox struct {
	TemplateID          string                `json:"templateID"`
	Timeout             *int64                `json:"timeout,omitempty"` // seconds
	AutoPause           *bool                 `json:"autoPause,omitempty"`
	Secure              *bool                 `json:"secure,omitempty"`
	AllowInternetAccess *bool                 `json:"allow_internet_access,omitempty"`
	Network             *SandboxNetworkConfig `json:"network,omitempty"`
	Metadata            map[string]string     `json:"metadata,omitempty"`
	EnvVars             map[string]string     `json:"envVars,omitempty"`
	VolumeMounts        []SandboxVolumeMount  `json:"volumeMounts,omitempty"`
}

// SandboxNetworkConfig is the part of a create's network options berth
// speaks: whether the sandbox's ports are open to anyone who names them
// (the default) or only to holders of its trafficAccessToken.
type SandboxNetworkConfig struct {
	AllowPublicTraffic *bool `json:"allowPublicTraffic,omitempty"`
}

// SandboxVolumeMount is SandboxVolumeMount.
type SandboxVolumeMount struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// Sandbox is the answer of create, connect and resume.
type Sandbox struct {
	TemplateID string `json:"templateID"`
	SandboxID  string `json:"sandboxID"`
	Alias      string `json:"alias,omitempty"`
	// ClientID is required by the schema and may be "".
	ClientID string `json:"clientID"`
	// EnvdVersion must be semver: the SDKs gate features on it.
	EnvdVersion     string `json:"envdVersion"`
	EnvdAccessToken string `json:"envdAccessToken,omitempty"`
	// TrafficAccessToken is set where the sandbox's ports are private.
	TrafficAccessToken *string `json:"trafficAccessToken"`
	// Domain is where the sandbox is reached; null sends the SDKs to
	// E2B_DOMAIN.
	Domain *string `json:"domain"`
}

// ListedSandbox is one sandbox of a list.
type ListedSandbox struct {
	TemplateID  string            `json:"templateID"`
	Alias       string            `json:"alias,omitempty"`
	SandboxID   string            `json:"sandboxID"`
	ClientID    string            `json:"clientID"`
	StartedAt   time.Time         `json:"startedAt"`
	EndAt       time.Time         `json:"endAt"`
	CPUCount    int               `json:"cpuCount"`
	MemoryMB    int               `json:"memoryMB"`
	DiskSizeMB  int               `json:"diskSizeMB"`
	Metadata    map[string]string `json:"metadata"`
	State       string            `json:"state"`
	EnvdVersion string            `json:"envdVersion"`
}

// SandboxDetail is the answer of GET /sandboxes/{sandboxID}: a listed
// sandbox and how to reach it.
type SandboxDetail struct {
	ListedSandbox
	EnvdAccessToken     string  `json:"envdAccessToken,omitempty"`
	Domain              *string `json:"domain"`
	AllowInternetAccess *bool   `json:"allowInternetAccess"`
}

// ConnectSandbox is the body of the connect routes: the sandbox lives at
// least timeout seconds from now (a running one is never shortened). The
// SDKs may send {}.
type ConnectSandbox struct {
	Timeout *int64 `json:"timeout,omitempty"`
}

// ResumedSandbox is the body of POST /sandboxes/{sandboxID}/resume.
type ResumedSandbox struct {
	Timeout   *int64 `json:"timeout,omitempty"`
	AutoPause *bool  `json:"autoPause,omitempty"`
}

// SandboxTimeout is the body of POST /sandboxes/{sandboxID}/timeout: the
// sandbox ends timeout seconds from now, sooner or later than before.
type SandboxTimeout struct {
	Timeout *int64 `json:"timeout,omitempty"`
}

// SandboxRefresh is the body of POST /sandboxes/{sandboxID}/refreshes:
// the sandbox lives at least duration seconds more.
type SandboxRefresh struct {
	Duration *int64 `json:"duration,omitempty"`
}

// SandboxLogs is the answer of GET /sandboxes/{sandboxID}/logs.
type SandboxLogs struct {
	Logs       []SandboxLog      `json:"logs"`
	LogEntries []SandboxLogEntry `json:"logEntries"`
}

// SandboxLog is one line of SandboxLogs.
type SandboxLog struct {
	Timestamp time.Time `json:"timestamp"`
	Line      string    `json:"line"`
}

// SandboxLogEntry is one structured entry of SandboxLogs.
type SandboxLogEntry struct {
	Timestamp time.Time         `json:"timestamp"`
	Message   string            `json:"message"`
	Level     string            `json:"level"`
	Fields    map[string]string `json:"fields"`
}

// Int64 is a pointer to v, for the optional fields.
func Int64(v int64) *int64 { return &v }

// Bool is a pointer to v, for the optional fields.
func Bool(v bool) *bool { return &v }

// String is a pointer to v, for the nullable fields.
func String(v string) *string { return &v }
