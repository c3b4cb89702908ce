package e2bapi

import (
	"encoding/json"
	"time"
)

// TemplateBuildStatus is TemplateBuildStatus.
const (
	BuildWaiting  = "waiting"
	BuildBuilding = "building"
	BuildReady    = "ready"
	BuildError    = "error"
)

// LogLevel is LogLevel.
const (
	LevelDebug = "debug"
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"
)

// TemplateBuildRequestV3 is the body of POST /v3/templates. Name may
// carry a tag ("name:tag"); Alias is its older spelling. cpuCount and
// memoryMB are left out: berth gives every sandbox its server's limits.
type TemplateBuildRequestV3 struct {
	Name  string   `json:"name,omitempty"`
	Alias string   `json:"alias,omitempty"`
	Tags  []string `json:"tags,omitempty"`
}

// TemplateRequestResponseV3 is the answer of POST /v3/templates.
type TemplateRequestResponseV3 struct {
	TemplateID string   `json:"templateID"`
	BuildID    string   `json:"buildID"`
	Public     bool     `json:"public"`
	Names      []string `json:"names"`
	Tags       []string `json:"tags"`
	Aliases    []string `json:"aliases"`
}

// TemplateBuildStartV2 is the body of POST
// /v2/templates/{templateID}/builds/{buildID}: the build's base and steps.
// FromImageRegistry (registry credentials) is kept raw.
type TemplateBuildStartV2 struct {
	FromImage         string          `json:"fromImage,omitempty"`
	FromTemplate      string          `json:"fromTemplate,omitempty"`
	FromImageRegistry json.RawMessage `json:"fromImageRegistry,omitempty"`
	Force             bool            `json:"force"`
	Steps             []TemplateStep  `json:"steps"`
	StartCmd          string          `json:"startCmd,omitempty"`
	ReadyCmd          string          `json:"readyCmd,omitempty"`
}

// TemplateStep is one step of a build. Args by type, as the SDK writes
// them: RUN [command, user?], COPY [src, dest, owner?, mode?] with
// FilesHash, ENV [k1, v1, k2, v2, ...], WORKDIR [dir], USER [name].
type TemplateStep struct {
	Type      string   `json:"type"`
	Args      []string `json:"args"`
	FilesHash string   `json:"filesHash,omitempty"`
	Force     bool     `json:"force"`
}

// TemplateBuildFileUpload is the answer of GET
// /templates/{templateID}/files/{hash}: whether the archive is there, and
// where to PUT it when it is not.
type TemplateBuildFileUpload struct {
	Present bool   `json:"present"`
	URL     string `json:"url,omitempty"`
}

// TemplateBuildInfo is the answer of GET
// /templates/{templateID}/builds/{buildID}/status.
type TemplateBuildInfo struct {
	Logs       []string           `json:"logs"`
	LogEntries []BuildLogEntry    `json:"logEntries"`
	TemplateID string             `json:"templateID"`
	BuildID    string             `json:"buildID"`
	Status     string             `json:"status"`
	Reason     *BuildStatusReason `json:"reason,omitempty"`
}

// BuildLogEntry is one line of a build's log.
type BuildLogEntry struct {
	Timestamp time.Time `json:"timestamp"`
	Message   string    `json:"message"`
	Level     string    `json:"level"`
	Step      string    `json:"step,omitempty"`
}

// BuildStatusReason says why a build failed, and where.
type BuildStatusReason struct {
	Message    string          `json:"message"`
	Step       string          `json:"step,omitempty"`
	LogEntries []BuildLogEntry `json:"logEntries"`
}

// TemplateAliasResponse is the answer of GET /templates/aliases/{alias}.
type TemplateAliasResponse struct {
	TemplateID string `json:"templateID"`
	Public     bool   `json:"public"`
}
