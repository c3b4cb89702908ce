// Package daytona is the driver for Daytona cloud sandboxes. It speaks
// Daytona's REST control plane and the per-sandbox toolbox API directly with
// net/http: no Go SDK for Daytona is published where berth is built. Package
// builtin opens it from the daytona registry entry; nothing else should
// import it. Its offline twin, package daytonatest, serves the same calls
// in-process for tests.
//
// The calls, fields and states are those of Daytona's generated OpenAPI
// clients (@daytona/api-client and @daytona/toolbox-api-client, 0.218),
// which a schema test checks every request of the driver against.
//
// How a Spec maps onto a create request:
//   - Image "snapshot:<name>" starts from that Daytona snapshot; any other
//     image is built by Daytona from the one-line Dockerfile "FROM <image>",
//     and carried in the label berth-image, since a listing shows neither
//     the build nor an image name (List reads it back into Info.Image).
//   - Resources become whole cpu cores, memory GB and disk GB, rounded up;
//     a request above the per-sandbox maximum (4 / 8 / 10 by default, see
//     Limits) is refused before anything is sent.
//   - TTL becomes ttlMinutes, rounded up: Daytona's TTL, a deadline counted
//     from creation that destroys the sandbox whatever its state. SetTimeout
//     moves it (POST /sandbox/{id}/ttl/{minutes}, anchored at the call).
//     Auto-stop, an inactivity policy, is off; autoDeleteInterval is 1440
//     minutes unless Options say otherwise. DAYTONA_TARGET becomes target.
//   - Spec.WorkDir travels as the sandbox variable BERTH_WORKDIR, so a
//     handle made by Connect in another process finds it too.
//
// Exec runs each command in its own toolbox session, asynchronously. The
// session's log is line-based text (stdout and stderr lines marked by the
// bytes 01 01 01 and 02 02 02), which cannot carry NUL bytes or say whether a
// last line had a newline. So the command line sent is a small POSIX sh
// wrapper that pipes the program's stdout and stderr through
// `dd | base64` chunk by chunk: output arrives as it is written and decodes to
// the exact bytes. The log is followed over the toolbox's WebSocket; when the
// stream drops, the driver polls the full log and continues from the byte
// where the stream stopped. Stdin travels the same way in reverse through the
// session's input route, with an end marker that closes the program's stdin.
//
// When the stream is polled instead, the daemon answers the marked log as
// JSON {output, stdout, stderr} (older daemons: as text); the driver reads
// output either way. Files are uploaded through the toolbox's bulk upload
// (the SDKs' route), which creates parent directories.
//
// Pause, Resume and Fork are Daytona's own calls; Daytona offers them for
// sandboxes of a VM class (linux-vm, windows: made from a snapshot built
// for that class) and answers 422 for a container, which the driver
// reports as NotSupported. A fork copies the running sandbox into a new
// one, which the caller owns.
//
// Signal runs `kill` on the PID the wrapper recorded, through the toolbox's
// one-off execute call; a command's Timeout deletes its session, which kills
// everything it started. The toolbox reports no PIDs, so Process.PID is 0.
// Stat does not follow a final symlink: the toolbox's file info does, so a
// one-off command tells a link apart first (two calls per Stat). There is
// no symlink upload. Commands run as the sandbox's user; another
// Command.User is NotSupported.
//
// Errors map onto the sandbox classes by status alone, through the one
// HTTP mapping of package sandbox/errdefs: 401/403 Unauthenticated, 404
// NotFound, 409 AlreadyExists, 400 InvalidArgument, 504 DeadlineExceeded,
// 502/503 Unavailable, and 429 ResourceExhausted carrying the advised wait
// from Retry-After or Retry-After-<throttler> (errdefs.Error.RetryAfter).
// Account quota refusals ("Total disk limit exceeded ...") are answered
// 400, so they are InvalidArgument and never retried; the driver does not
// read the text. The driver's own disk cap (DiskQuotaGB) refuses a sandbox
// larger than the whole quota as a Permanent ResourceExhausted. Calls
// other than the create itself retry a 429 after the advised wait a
// bounded number of times (package providers/internal/rest).
//
// The API key is only ever placed in the Authorization header, by the
// shared REST client's transport, of requests to the API's origin and the
// toolbox proxy's; a redirect elsewhere is refused. Server texts that echo
// the key are redacted before they become errors.
package daytona
