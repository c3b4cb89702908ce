package task

// Config mirrors task.toml. Fields the runner does not use are kept so that
// result.json can echo the task's configuration.
type Config struct {
	Version       string            `toml:"version" json:"version,omitempty"`
	SchemaVersion string            `toml:"schema_version" json:"schema_version,omitempty"`
	Artifacts     []any             `toml:"artifacts" json:"artifacts,omitempty"`
	Task          TaskInfo          `toml:"task" json:"task"`
	Metadata      map[string]any    `toml:"metadata" json:"metadata,omitempty"`
	Agent         AgentConfig       `toml:"agent" json:"agent"`
	Verifier      VerifierConfig    `toml:"verifier" json:"verifier"`
	Solution      SolutionConfig    `toml:"solution" json:"solution"`
	Environment   EnvironmentConfig `toml:"environment" json:"environment"`
}

// TaskInfo is the [task] table of the registry form (schema 1.1+).
type TaskInfo struct {
	Name        string   `toml:"name" json:"name,omitempty"`
	Description string   `toml:"description" json:"description,omitempty"`
	Keywords    []string `toml:"keywords" json:"keywords,omitempty"`
	Authors     []Author `toml:"authors" json:"authors,omitempty"`
}

// Author is one [[task.authors]] entry.
type Author struct {
	Name  string `toml:"name" json:"name,omitempty"`
	Email string `toml:"email" json:"email,omitempty"`
}

// AgentConfig is the [agent] table.
type AgentConfig struct {
	TimeoutSec *float64       `toml:"timeout_sec" json:"timeout_sec,omitempty"`
	User       string         `toml:"user" json:"user,omitempty"`
	Kwargs     map[string]any `toml:"kwargs" json:"kwargs,omitempty"`
}

// VerifierConfig is the [verifier] table.
type VerifierConfig struct {
	TimeoutSec *float64          `toml:"timeout_sec" json:"timeout_sec,omitempty"`
	User       string            `toml:"user" json:"user,omitempty"`
	Env        map[string]string `toml:"env" json:"env,omitempty"`
}

// SolutionConfig is the [solution] table.
type SolutionConfig struct {
	Env map[string]string `toml:"env" json:"env,omitempty"`
}

// EnvironmentConfig is the [environment] table. Memory and Storage are the
// legacy string forms ("4G"); Load folds them into MemoryMB and StorageMB.
type EnvironmentConfig struct {
	BuildTimeoutSec *float64          `toml:"build_timeout_sec" json:"build_timeout_sec,omitempty"`
	DockerImage     string            `toml:"docker_image" json:"docker_image,omitempty"`
	CPUs            float64           `toml:"cpus" json:"cpus,omitempty"`
	MemoryMB        int               `toml:"memory_mb" json:"memory_mb,omitempty"`
	StorageMB       int               `toml:"storage_mb" json:"storage_mb,omitempty"`
	Memory          any               `toml:"memory" json:"-"`
	Storage         any               `toml:"storage" json:"-"`
	GPUs            int               `toml:"gpus" json:"gpus,omitempty"`
	GPUTypes        []string          `toml:"gpu_types" json:"gpu_types,omitempty"`
	AllowInternet   *bool             `toml:"allow_internet" json:"allow_internet,omitempty"`
	NetworkMode     string            `toml:"network_mode" json:"network_mode,omitempty"`
	AllowedHosts    []string          `toml:"allowed_hosts" json:"allowed_hosts,omitempty"`
	Workdir         string            `toml:"workdir" json:"workdir,omitempty"`
	OS              string            `toml:"os" json:"os,omitempty"`
	MCPServers      []any             `toml:"mcp_servers" json:"mcp_servers,omitempty"`
	Env             map[string]string `toml:"env" json:"env,omitempty"`
	Healthcheck     *Healthcheck      `toml:"healthcheck" json:"healthcheck,omitempty"`
}

// Healthcheck is [environment.healthcheck] (schema 1.4).
type Healthcheck struct {
	Command        string   `toml:"command" json:"command"`
	IntervalSec    *float64 `toml:"interval_sec" json:"interval_sec,omitempty"`
	TimeoutSec     *float64 `toml:"timeout_sec" json:"timeout_sec,omitempty"`
	StartPeriodSec *float64 `toml:"start_period_sec" json:"start_period_sec,omitempty"`
	Retries        *int     `toml:"retries" json:"retries,omitempty"`
}
