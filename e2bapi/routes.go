package e2bapi

import (
	"net/url"
	"strings"
)

// Control-plane routes as http.ServeMux patterns without a method: path
// parameters are named as the spec names them ({sandboxID}, {templateID},
// {buildID}, {hash}, {alias}). Path fills them in for a client.
const (
	RouteSandboxes    = "/sandboxes"                                      // GET list (v1), POST create (v1: NewSandbox -> Sandbox)
	RouteSandboxesV2  = "/v2/sandboxes"                                   // GET list (paged), POST create (SDK >= 2.51)
	RouteSandbox      = "/sandboxes/{sandboxID}"                          // GET SandboxDetail, DELETE kill
	RouteTimeout      = "/sandboxes/{sandboxID}/timeout"                  // POST SandboxTimeout
	RouteRefreshes    = "/sandboxes/{sandboxID}/refreshes"                // POST SandboxRefresh (older SDKs' keep-alive)
	RouteConnect      = "/sandboxes/{sandboxID}/connect"                  // POST ConnectSandbox -> Sandbox
	RouteConnectV2    = "/v2/sandboxes/{sandboxID}/connect"               // POST ConnectSandbox -> Sandbox (SDK >= 2.51)
	RoutePause        = "/sandboxes/{sandboxID}/pause"                    // POST
	RouteResume       = "/sandboxes/{sandboxID}/resume"                   // POST ResumedSandbox -> Sandbox (SDK <= 2.5)
	RouteMetrics      = "/sandboxes/{sandboxID}/metrics"                  // GET
	RouteLogs         = "/sandboxes/{sandboxID}/logs"                     // GET SandboxLogs
	RouteLogsV2       = "/v2/sandboxes/{sandboxID}/logs"                  // GET
	RouteSnapshots    = "/sandboxes/{sandboxID}/snapshots"                // POST
	RouteNetwork      = "/sandboxes/{sandboxID}/network"                  // PUT
	RouteHealth       = "/health"                                         // GET
	RouteTemplatesV3  = "/v3/templates"                                   // POST TemplateBuildRequestV3 -> TemplateRequestResponseV3
	RouteTemplate     = "/templates/{templateID}"                         // DELETE
	RouteTemplateFile = "/templates/{templateID}/files/{hash}"            // GET TemplateBuildFileUpload; PUT its url
	RouteBuildV2      = "/v2/templates/{templateID}/builds/{buildID}"     // POST TemplateBuildStartV2
	RouteBuildStatus  = "/templates/{templateID}/builds/{buildID}/status" // GET TemplateBuildInfo
	RouteAlias        = "/templates/aliases/{alias}"                      // GET TemplateAliasResponse
)

// Path fills route's parameters, in order, each path-escaped:
// Path(RouteConnect, id) is "/sandboxes/<id>/connect". Parameters left
// over are dropped; parameters missing leave their pattern in place.
func Path(route string, params ...string) string {
	var b strings.Builder
	for rest := route; rest != ""; {
		i := strings.IndexByte(rest, '{')
		j := strings.IndexByte(rest, '}')
		if i < 0 || j < i || len(params) == 0 {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:i])
		b.WriteString(url.PathEscape(params[0]))
		params, rest = params[1:], rest[j+1:]
	}
	return b.String()
}

// Headers of the control plane and of the multiplexed data plane.
const (
	// APIKeyHeader carries the API key on every control-plane call.
	APIKeyHeader = "X-API-KEY"
	// NextTokenHeader carries the next page's token of a v2 list; absent
	// on the last page.
	NextTokenHeader = "X-Next-Token"
	// SandboxIDHeader and SandboxPortHeader name the sandbox and port of a
	// data-plane call to one URL for every sandbox (E2B_SANDBOX_URL; SDK
	// >= 2.7 on RPCs, >= 2.14.1 on /files).
	SandboxIDHeader   = "E2b-Sandbox-Id"
	SandboxPortHeader = "E2b-Sandbox-Port"
	// TrafficAccessTokenHeader carries a sandbox's trafficAccessToken on
	// calls to its own ports, when they are private
	// (network.allowPublicTraffic false).
	TrafficAccessTokenHeader = "E2b-Traffic-Access-Token"
)

// Query parameters of the list routes.
const (
	QueryMetadata  = "metadata" // an urlencoded k=v&k2=v2 filter
	QueryState     = "state"    // running, paused, comma-separated (v2)
	QueryLimit     = "limit"    // page size, at most MaxPageLimit (v2)
	QueryNextToken = "nextToken"
)

// MaxPageLimit is the spec's largest (and default) page of a v2 list.
const MaxPageLimit = 100

// Defaults of the API.
const (
	// DefaultDomain is E2B Cloud's; sandboxes are reached at
	// <port>-<sandboxID>.<domain>.
	DefaultDomain = "e2b.app"
	// DefaultAPIURL is E2B Cloud's control plane: https://api.<domain>.
	DefaultAPIURL = "https://api." + DefaultDomain
	// DefaultTemplate is the template the SDKs create from when given none.
	DefaultTemplate = "base"
	// EnvdPort is envd's port in a sandbox: it names the data plane's host
	// (49983-<sandboxID>.<domain>) or goes in SandboxPortHeader.
	EnvdPort = "49983"
)
