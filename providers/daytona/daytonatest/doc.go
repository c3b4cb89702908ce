// Package daytonatest is an in-process Daytona server for offline tests of
// the daytona driver, of anything that runs on it (`berth smoke` pointed
// at it by DAYTONA_API_URL), and of Daytona's official SDKs: the
// TypeScript SDK (0.218, testdata/sdk) runs its scenario against it, and
// its answers are checked against the SDK's generated models (Schema).
// Command daytonatest (cmd/daytonatest) serves it standalone.
//
// It serves the REST and toolbox calls of those clients with Daytona's
// shapes, states and error texts: sandboxes go creating/pending_build ->
// started, builds can end in build_failed with a build log; stop, start,
// pause and resume (SIGSTOP and SIGCONT of the sandbox's processes), fork
// (a copy of the file system), TTL (a deadline that destroys the sandbox
// whatever its state), auto-stop and auto-delete run on a clock whose
// minute tests may shorten; quotas and per-sandbox maxima answer with
// Daytona's texts; only sandboxes of a VM class (from a snapshot named in
// Options.SnapshotClasses) pause and fork, others answer 422 as Daytona
// does. Errors come in the envelope of the part that answers: the API's
// {path, timestamp, statusCode, error, message}, the toolbox daemon's
// {statusCode, message, code, source, ...}.
//
// The toolbox: sessions and their commands, whose logs are written the way
// Daytona's daemon writes them (one line per line of output, opened by
// 01 01 01 or 02 02 02, NUL bytes dropped, a final newline added) and
// answered in the form the daemon picks from X-Daytona-SDK-Version
// (merged text, marked text, or JSON {output, stdout, stderr}), whole or
// followed over a WebSocket; one-off execute; files, including the SDKs'
// bulk upload and multipart bulk download. Preview links for a port are
// paths on the fake's address (/preview/<port>-<id>, with the sandbox's
// X-Daytona-Preview-Token; /signed/<port>-<token>, until expired), proxied
// to that port on the loopback address, where a server started in the
// sandbox listens. The SDKs' event stream (socket.io) is not served: they
// poll instead.
//
// Commands run as real processes: each sandbox is a directory holding a
// busybox userland, and its commands run confined to it (a static busybox
// is needed, and root or unprivileged user namespaces; Available says why
// not). The sandboxes' trees, processes and TTLs are
// internal/testing/fakeengine's; this package is Daytona's wire in front
// of it. It isolates nothing: it is a test double, not a sandbox.
//
// Faults are steerable: Inject answers matching requests with an error (429
// with Retry-After-<throttler> headers, quota texts), FailBuilds makes the
// next builds fail with a given log, DropStreams cuts log streams after a
// number of bytes. Options.Record keeps every exchange's JSON for schema
// checks (Exchanges).
//
// Import it only from tests, test helpers and cmd/daytonatest.
package daytonatest
