// Package e2bserve is berth serve's E2B API over a core.Server: the
// control plane (POST /sandboxes and /v2/sandboxes, list with paging, get,
// kill, timeout, refreshes, connect v1 and v2, resume for SDKs before 2.6,
// health; pause, snapshots and network changes refused with 501) and the
// data plane (envd's routes, served by package dataplane), in the wire of
// package e2bapi.
//
// The data plane is routed by the E2b-Sandbox-Id header (SDKs >= 2.7), by
// Host "<port>-<id>.<domain>", or by the per-sandbox X-Access-Token (SDKs
// 2.7 - 2.14.0 send /files with neither); a port other than envd's is the
// sandbox's own (ports.go of dataplane), open to anyone who names the
// sandbox unless it was created with allowPublicTraffic false, when it
// needs the traffic token, or the credentials its API added
// (core.PortCredentials: an OpenSandbox sandbox's owner key and execd
// token).
//
// The API also builds E2B templates (template_*.go), as the SDKs'
// Template.build calls it: POST /v3/templates, the file-upload check and a
// signed PUT of each copied archive, the build start, its status with logs
// (logsOffset), and the alias check (404 missing, 403 another key's). A
// template's steps become a Dockerfile that the provider builds apart
// from any sandbox (sandbox.Provider.BuildImage; local runs package
// imagebuild); a provider that cannot build answers 501. Templates belong
// to the key that named them first, are cached by alias and by content per
// key (a repeat starts nothing), take turns per alias, and are bounded in
// upload size, files, steps, log size, build time and builds per key; an
// upload must keep up a minimum rate, and a key sends only a few at once.
// A create then names the template by alias, alias:tag or ID; its start
// command runs in each sandbox, which create answers once the ready
// command succeeds.
//
// Importers: package serve.
package e2bserve
