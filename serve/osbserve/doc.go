// Package osbserve is berth serve's OpenSandbox API over a core.Server:
// the lifecycle routes that NeMo Gym's opensandbox provider and the
// OpenSandbox SDKs call (POST/GET /v1/sandboxes, GET and DELETE
// /v1/sandboxes/{id}, renew-expiration, the endpoint lookup), and behind
// the proxy path /sandboxes/{id}/proxy/{port} (with or without /v1) each
// sandbox's execd (44772, package opensandbox's Execd over the sandbox
// API) and egress API (18080). Its wire is package opensandbox's.
//
// A create answers 202 at once when the provider is slow (Pending, then
// Running or Failed, as upstream's do): the provider creates in the
// background, so that an image pull outlives no client's timeout. The
// endpoint lookup always answers this server's proxy path, with the
// sandbox's execd token, which the proxy takes, as it takes the owning
// key. The lifecycle authenticates by OPEN-SANDBOX-API-KEY. A sandbox's own
// ports, through the E2B API's port routes, are private: they take its
// traffic token, its execd token or its owner's key (the
// core.PortCredentials this API adds). Background commands' output is
// kept in memory under bounds per command, per sandbox and per key
// (core.OpenSandboxOptions).
//
// Importers: package serve.
package osbserve
