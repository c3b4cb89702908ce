// Package serve is `berth serve`: the E2B API (control plane and envd data
// plane, shared/facts/e2b-protocol.md) over any registered provider, so that
// the official E2B SDKs and tools built on them use berth's sandboxes by
// changing two URLs.
//
// A Server is an http.Handler. The control plane (POST /sandboxes and
// /v2/sandboxes, list, get, delete, timeout, connect, resume, health)
// authenticates by X-API-KEY against an apikeys.Keyring. The data plane is
// routed by the E2b-Sandbox-Id header, by Host "<port>-<id>.<domain>", or by
// the per-sandbox X-Access-Token, and is served by package dataplane: a
// proxy for sandboxes that run their own envd (sandbox.EnvdEndpoint),
// otherwise a translation onto the sandbox.Sandbox API.
//
// The server enforces the sandbox TTLs itself (a timer deletes each
// sandbox; the provider gets the same TTL as a backstop), caps live
// sandboxes per key (429 with Retry-After), bounds bodies (413), exposes
// Prometheus metrics at /metrics and logs with slog, never a key or token.
//
// The same listener serves OpenSandbox's lifecycle and execd APIs
// (alibaba/OpenSandbox specs), which NeMo Gym's opensandbox provider and
// the OpenSandbox SDKs speak: POST/GET /v1/sandboxes, GET and DELETE
// /v1/sandboxes/{id}, the endpoint lookup (always this server's proxy path
// /sandboxes/{id}/proxy/{port}, for execd's port 44772 and the egress port
// 18080), and behind that path package opensandbox's execd over the
// sandbox API, for every provider. A separate listener was not needed: the
// OpenSandbox routes (/v1/..., /sandboxes/{id}/proxy/...) are paths the
// E2B API does not have, so one address, one key file, one per-key pool of
// sandboxes and one TTL enforcement serve both, and a client's
// OPENSANDBOX_DOMAIN is the host:port of its E2B_API_URL. The lifecycle
// authenticates by OPEN-SANDBOX-API-KEY; the proxy path by the sandbox's
// execd token (X-EXECD-ACCESS-TOKEN, handed out by the endpoint lookup) or
// the owning key. Creates answer 202 at once when the provider is slow
// (Pending, then Running or Failed), as upstream's do. An OpenSandbox
// sandbox's own ports, through the E2B port routes, are private: they take
// its traffic token, its execd token or its owner's key. Its background
// commands' output is kept in memory under bounds per command, per
// sandbox and per key (OpenSandboxOptions).
//
// The control plane also builds E2B templates (template_*.go), as the
// SDKs' Template.build calls it: POST /v3/templates, the file-upload check
// and a signed PUT of each copied archive, the build start, its status
// with logs (logsOffset), and the alias check (404 missing, 403 another
// key's). A template's steps become a Dockerfile that the provider builds
// apart from any sandbox (sandbox.Provider.BuildImage; local runs package
// imagebuild); a provider that cannot build answers 501. Templates belong
// to the key that named them first, are cached by alias and by content
// per key (a repeat starts nothing), take turns per alias, and are bounded
// in upload size, files, steps, log size, build time and builds per key;
// an upload must keep up a minimum rate, and a key sends only a few at
// once.
// A create then names the template by alias, alias:tag or ID; its start
// command runs in each sandbox, which create answers once the ready
// command succeeds.
//
// An image a client names (a build's fromImage, an OpenSandbox create's
// image beyond the templates) is pulled under sandbox.PullPolicy: public
// addresses only, checked at every dial, unless Options.AllowRegistries
// names the registry; its failure tells the client a class and the
// reference, never what the registry answered. The templates' images are
// the operator's and pulled as named.
//
// Importers: cmd/berth (the serve verb).
package serve
