// Package daytonatest is an in-process Daytona server for offline tests of
// the daytona driver and of anything that runs on it (`berth smoke` pointed
// at it by DAYTONA_API_URL). It serves the REST calls and toolbox calls the
// driver makes, with Daytona's documented shapes, states and error texts:
// sandboxes go creating/pending_build -> started, builds can end in
// build_failed with a build log, quotas and per-sandbox maxima answer with
// Daytona's texts, auto-stop and auto-delete run on a clock whose minute
// tests may shorten.
//
// Commands run as real processes: each sandbox is a directory holding a
// busybox userland, and its commands run chrooted into it (root and a
// static busybox are needed; Available says why not). Session logs are
// written the way Daytona's daemon writes them: one line per line of output,
// opened by 01 01 01 or 02 02 02, NUL bytes dropped, a final newline added.
//
// Faults are steerable: Inject answers matching requests with an error (429
// with Retry-After-<throttler> headers, quota texts), FailBuilds makes the
// next builds fail with a given log, DropStreams cuts log streams after a
// number of bytes.
//
// Import it only from tests and test helpers.
package daytonatest
