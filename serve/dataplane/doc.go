// Package dataplane serves E2B's envd protocol (the process and filesystem
// Connect services with the JSON codec, /files and /health) for one
// sandbox of any provider.
//
// New translates every call into the sandbox.Sandbox API: Exec with
// streaming output, stdin through a pipe, signals, and the file calls.
// NewProxy forwards calls unchanged to a sandbox that runs its own envd
// server (sandbox.EnvdEndpoint), swapping the client's access token for the
// sandbox's own.
//
// Neither checks the caller: package serve authenticates and routes before
// handing a request over. Importers: package serve.
package dataplane
