// Package serve is `berth serve`: the E2B API (control plane and envd data
// plane, shared/facts/e2b-protocol.md) and OpenSandbox's lifecycle and
// execd APIs (alibaba/OpenSandbox specs) over any registered provider, on
// one address, so that the official E2B and OpenSandbox SDKs, and the
// tools built on them (NeMo Gym's opensandbox provider), use berth's
// sandboxes by changing a URL.
//
// A Server is an http.Handler; ListenAndServe runs one on an address until
// its context ends. It puts the two APIs over one shared server:
//
//	serve                 New, Options, ListenAndServe; routes each call:
//	                      the E2B data plane when it names a sandbox, the
//	                      OpenSandbox API for its routes (under /v1/ and
//	                      /sandboxes/{id}/proxy/), else the E2B control plane
//	serve/e2bserve        the E2B API: create (v1 and v2), list, get, kill,
//	                      timeout, connect, resume; template builds; and the
//	                      data plane, routed by E2b-Sandbox-Id, by Host
//	                      "<port>-<id>.<domain>" or by X-Access-Token, with
//	                      the sandboxes' own ports
//	serve/osbserve        the OpenSandbox API: create (202 Pending while the
//	                      provider is slow), list, get, delete, renew, the
//	                      endpoint lookup, and the proxy to each sandbox's
//	                      execd and egress API
//	serve/internal/core   what both share: the options, the keys, the records
//	                      of the sandboxes and their store (in memory, or in
//	                      the provider's labels for stateless replicas), the
//	                      per-key limits, the TTL timers, access tokens, the
//	                      data plane's attachment, metrics and request logs
//	e2bapi                E2B's control-plane wire (the driver speaks it too)
//	serve/opensandbox     OpenSandbox's wire, and execd over the sandbox API
//	serve/dataplane       envd's protocol for one sandbox of any provider
//	serve/apikeys         the key file
//
// The OpenSandbox routes are paths the E2B API does not have, so one
// address, one key file, one per-key pool of sandboxes and one TTL
// enforcement serve both, and a client's OPENSANDBOX_DOMAIN is the
// host:port of its E2B_API_URL. The E2B control plane authenticates by
// X-API-KEY, the OpenSandbox lifecycle by OPEN-SANDBOX-API-KEY, the data
// plane by the per-sandbox access token, an OpenSandbox proxy path by the
// sandbox's execd token or its owner's key.
//
// The server enforces the sandbox TTLs itself (a timer deletes each
// sandbox; the provider gets the same TTL as a backstop), caps live
// sandboxes and their resources per key (429 with Retry-After), bounds
// bodies (413), exposes Prometheus metrics at /metrics and logs with slog,
// never a key or token. An image a client names (a template build's
// fromImage, an OpenSandbox create's image beyond the templates) is pulled
// under sandbox.PullPolicy: public addresses only unless
// Options.AllowRegistries names the registry.
//
// Importers: cmd/berth (the serve verb), and tests that run a server.
package serve
