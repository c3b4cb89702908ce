// Package hostproc is berth's one host-process engine: it starts a program
// on this machine (optionally confined to a directory tree that it sees as
// /), in a process group of its own, with its output on pipes; it reports
// the exit (128+n for a process killed by signal n, as a shell does), kills
// the whole group, and finds programs in the command's own PATH.
//
// It also absorbs the ETXTBSY race once for every caller: a file that was
// just written (an upload) is still open for writing in any process that
// forked meanwhile, until that child execs, and exec of the file fails
// with "text file busy" until then (Go issue 22315). Start retries such a
// refusal for a bounded time (BusyWait) instead of failing the command.
//
// Users: envd's host backend (the agent inside local and k8s sandboxes,
// agent/selfdriver) and internal/testing/fakeengine, the one backend of the
// fakes (fakeprovider, daytonatest, modaltest, the e2b driver's fake).
// Each keeps its own wire and bookkeeping and starts, waits for and
// signals its processes here.
package hostproc
