// Package dataplane serves E2B's envd protocol for one sandbox of any
// provider, in two ways.
//
// New gives package envd's protocol server (the one the agent runs inside
// local sandboxes) a backend over the sandbox.Sandbox API: Exec with
// streaming output, stdin through a pipe, signals, and the file calls. The
// protocol itself (routes, framing, keepalives, the process table, limits,
// error codes) is not repeated here.
//
// NewProxy forwards calls unchanged to a sandbox that runs its own envd
// server (sandbox.EnvdEndpoint), swapping the client's access token for the
// sandbox's own.
//
// Neither checks the caller: serve/e2bserve authenticates and routes
// before handing a request over; serve/internal/core attaches them to each
// sandbox's record. Importers: serve/internal/core, and serve/opensandbox
// for ResolvePath.
package dataplane
