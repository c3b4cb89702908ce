// Package modaltest is an in-process Modal server for offline tests of the
// modal provider and of anything that runs on it (the smoke runner, the CLI).
// It speaks gRPC with the Go SDK's own generated definitions
// (github.com/modal-labs/modal-client/go/proto/modal_proto): the control
// plane (modal.client.ModalClient) and the task command router
// (modal.task_command_router.TaskCommandRouter) on one loopback listener, in
// plain text, which the SDK accepts for a localhost MODAL_SERVER_URL.
//
// Import it from _test.go files (and test binaries); Start serves until
// Close. Point the SDK at it with MODAL_SERVER_URL=Server.URL() and the
// token pair in Options.
//
// What it implements, and the shapes it answers with:
//
//   - Auth: every control-plane call must carry the token pair
//     (x-modal-token-id, x-modal-token-secret) and, except AuthTokenGet, the
//     JWT that AuthTokenGet issued (x-modal-auth-token); every router call a
//     bearer JWT issued for that sandbox's task. Anything else is
//     UNAUTHENTICATED, with a message that never repeats what was sent.
//   - EnvironmentGetOrCreate, AppGetOrCreate (per environment; unknown
//     environments are NOT_FOUND).
//   - ImageGetOrCreate + ImageJoinStreaming: the first request for a
//     Dockerfile answers without a result, and the join stream sends build
//     log lines, then SUCCESS (or FAILURE with the configured log and
//     exception, see FailBuild). Nothing is pulled: the image is the host.
//   - Sandboxes, V2 only (the SDK's default and berth's MODAL_SANDBOX_V2=1):
//     SandboxCreateV2, SandboxGetTaskIdV2, SandboxWaitV2, SandboxTerminateV2,
//     SandboxListV2 (running only, newest first, paged by created_at),
//     SandboxTagsGetV2 / SandboxTagsSetV2, SandboxGetCommandRouterAccess. A
//     sandbox ends at its timeout_secs with status TIMEOUT (exit 124) or when
//     terminated with TERMINATED (exit 137); ended sandboxes stay queryable
//     (wait, task id) and unknown IDs are NOT_FOUND.
//   - Exec through the router: TaskExecStart, TaskExecStdioRead (resumes at
//     the requested byte offset), TaskExecWait (code, or the signal of a
//     killed process), TaskExecStdinWrite, TaskExecStdinWriteStream,
//     TaskExecStdinStatus. Commands are real processes, each in its own
//     process group, in the sandbox's tree <Dir>/<sandbox>/root
//     (internal/testing/fakeengine holds the sandboxes). With
//     Options.Busybox they run chrooted into it (busybox and its applets in
//     /bin, /dev/null and friends), so every path in a command is a sandbox
//     path; without it they are host programs started in the mapped working
//     directory, and only the working directory and file calls are sandbox
//     paths. They see only the sandbox's and the command's environment plus
//     a PATH. A missing program exits 127. It isolates nothing: it is a test
//     double, not a sandbox.
//   - Outbound network policy: SandboxCreateV2 refuses allowlist entries
//     that are not CIDRs or domain names (wildcard "*." prefix allowed) and
//     entries outside allowlist mode; the policy is recorded in the
//     definition, not enforced (commands share the host's network).
//   - File system snapshots: TaskSnapshotFilesystem (through the router)
//     copies the running sandbox's tree into a new image, idempotent by the
//     client's snapshot ID; ImageFromId answers for it, and a sandbox
//     created from it starts with that tree.
//   - The SDK's file calls exec /__modal/.bin/modal-sandbox-fs-tools with a
//     JSON command; the server runs that tool itself (ListFiles, Stat,
//     ReadFile, WriteFile, MakeDirectory, Remove) on the sandbox's tree,
//     where paths resolve as inside the sandbox, with the error payloads
//     the SDK parses.
//
// Faults are steered at run time: Throttle (RESOURCE_EXHAUSTED carrying the
// protocol's RPCRetryPolicy retry hint), Quota (RESOURCE_EXHAUSTED without
// one), Unavailable (UNAVAILABLE, an unreachable worker), FailBuild, DropStreams (exec output streams cut with UNAVAILABLE
// mid-command). Calls records every call for assertions.
package modaltest
