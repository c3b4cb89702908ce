// Package opensandbox is the wire of OpenSandbox's two REST APIs
// (alibaba/OpenSandbox specs/sandbox-lifecycle.yml and specs/execd-api.yaml)
// and a server of its execd API for one sandbox of any provider.
//
// The lifecycle types (CreateRequest, Sandbox, Endpoint, ListResponse) are
// what the official SDKs send and parse; package serve/osbserve routes and
// answers them. Execd serves the execd calls NeMo Gym's opensandbox
// provider and the SDKs make, translated onto the sandbox.Sandbox API:
//
//	GET    /ping                   200
//	POST   /command                an event stream: init, stdout/stderr (one
//	                               event a line), then execution_complete, or
//	                               error with the exit code as evalue
//	DELETE /command?id=            kills a command
//	GET    /command/status/{id}    {id, content, running, exit_code, error, started_at, finished_at}
//	GET    /command/{id}/logs      a background command's output from ?cursor=
//	                               (a byte offset); the next cursor in
//	                               EXECD-COMMANDS-TAIL-CURSOR, the bytes
//	                               from the cursor no longer kept in
//	                               X-Berth-Dropped-Bytes
//	POST   /files/upload           multipart: a metadata part {path, mode}
//	                               then a file part, as pairs
//	GET    /files/download?path=   the file's bytes
//
// Events are written as upstream's execd writes them: one JSON object
// followed by a blank line, flushed at once. Background commands keep the
// tail of their combined output for the logs call, in memory, bounded per
// command, per sandbox and per LogBudget (retain.go); foreground commands
// are killed when their client goes away, as upstream does.
//
// Egress answers the egress sidecar's GET /policy with the policy the
// sandbox was created with; changing it is refused.
//
// Neither checks the caller: package serve/osbserve authenticates and
// routes before handing a request over. Importers: serve/osbserve, and the
// tests' client side (serve/internal/servetest).
package opensandbox
