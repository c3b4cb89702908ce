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
// Importers: cmd/berth (the serve verb).
package serve
