package serve

import (
	"fmt"

	"github.com/berth-sh/berth/serve/internal/core"
)

// Options configure New: the provider, the keys, the limits of every
// sandbox and key, and each API's own (OpenSandbox, TemplateBuilds). Their
// fields are documented where the server that reads them lives
// (serve/internal/core, shared by both APIs).
type Options = core.Options

// OpenSandboxOptions configure the OpenSandbox API.
type OpenSandboxOptions = core.OpenSandboxOptions

// TemplateBuildOptions configure E2B template builds.
type TemplateBuildOptions = core.TemplateBuildOptions

// DefaultResources are the limits of every sandbox the server creates when
// Options.Resources leaves a field zero.
var DefaultResources = core.DefaultResources

// ParseTemplate parses a --template NAME=IMAGE flag.
func ParseTemplate(kv string) (name, image string, err error) { return core.ParseTemplate(kv) }

// URLs are what a client sets to use a server listening at addr.
type URLs struct {
	APIURL     string // E2B_API_URL
	SandboxURL string // E2B_SANDBOX_URL
	Domain     string // E2B_DOMAIN
}

// ClientURLs returns the environment an E2B client needs for a server at
// base (e.g. "http://127.0.0.1:3000").
func ClientURLs(base, domain string) URLs {
	if domain == "" {
		domain = "localhost"
	}
	return URLs{APIURL: base, SandboxURL: base, Domain: domain}
}

// Exports prints the URLs as shell exports.
func (u URLs) Exports() string {
	return fmt.Sprintf("export E2B_API_URL=%s\nexport E2B_SANDBOX_URL=%s\nexport E2B_DOMAIN=%s\n", u.APIURL, u.SandboxURL, u.Domain)
}
