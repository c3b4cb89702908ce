// Package envd speaks E2B's envd protocol, both sides: the process and
// filesystem services over Connect with the JSON codec, plus the plain HTTP
// routes /files and /health (shared/facts/e2b-protocol.md).
//
// NewServer returns an http.Handler that runs processes with os/exec and does
// file operations on real paths. The berth binary serves it as PID 1 inside a
// local sandbox, over a unix socket (see UnixHTTPClient), and `berth serve`
// can mount it. NewClient is the other side: its methods match the contracts
// of sandbox/driver, so the local and e2b providers import this package and
// hand its Process out as their driver.Process.
//
// Importers: providers/local (agent and driver), the e2b provider, berth serve.
// The message structs live in the subpackage envdproto.
package envd
