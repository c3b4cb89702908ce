// Package envd speaks E2B's envd protocol, both sides: the process and
// filesystem services over Connect with the JSON codec, plus the plain HTTP
// routes /files and /health (shared/facts/e2b-protocol.md).
//
// The server side is written once, in Server, over a small Backend that
// starts processes and touches files. NewServer uses this host's backend
// (internal/hostproc, real paths, users): the berth binary serves it as PID
// 1 inside a local sandbox, over a unix socket (see UnixHTTPClient). Package
// serve/dataplane gives New a backend over the sandbox API, so that
// `berth serve` answers the same protocol for a sandbox of any provider.
//
// NewClient is the other side: its methods match the contracts of
// sandbox/driver, so the local and e2b providers import this package and
// hand its Process out as their driver.Process.
//
// Importers: providers/local (agent and driver), the e2b provider, berth
// serve and its data plane. The message structs live in the subpackage
// envdproto.
package envd
