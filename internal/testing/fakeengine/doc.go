// Package fakeengine is the one sandbox backend behind berth's fakes: the
// fault-injecting provider (internal/testing/fakeprovider), the Daytona
// server (providers/daytona/daytonatest), the Modal server
// (providers/modal/modaltest) and the E2B server of the e2b driver's tests.
// Each of those is only its vendor's wire in front of an Engine: routing,
// request and answer types, error shapes and codes, and the vendor's own
// quirks (Daytona's states and quotas, Modal's tunnels and snapshots).
//
// An Engine holds a table of sandboxes. A sandbox is a directory tree,
// <Dir>/<id>/root, that is its "/", laid out by busyroot at create (a
// static busybox makes it a userland, and then every command runs
// confined to the tree: chrooted as root, in a user namespace of its own
// otherwise); labels, a base environment, a working directory and a
// deadline. What the fakes once each decided for themselves is decided
// here, once:
//
//   - Expiry: a sandbox ends at its deadline, exactly: from that instant
//     every lookup sees it ended, even before the timer has torn it down
//     (TestExpiryIsExact).
//   - An ended sandbox (deleted, expired, or its engine closed) stays in
//     the table as a record that says how and when it ended, so that a
//     wire may still answer for it (Modal's wait); its processes are
//     dead, its tree is gone, and every file or exec call on it is
//     NotFound (TestEndedSandboxAnswers).
//   - Files are reached through internal/dirfd from the root's fd, as a
//     process inside sees them: a symlink the tree holds resolves inside
//     the tree, an absolute one from the sandbox's "/", never the host's,
//     and nothing resolves outside (TestSymlinksResolveInside). Stat and
//     List describe a symlink itself unless the wire asks to follow it
//     (Daytona's daemon does).
//   - A file written anew is 0644 and a directory made anew 0755, whatever
//     the umask; an overwritten file keeps its mode unless the call names
//     one (TestFileModes).
//
// Commands start through internal/hostproc, in a process group each, with
// the sandbox's environment under the command's; a program that cannot be
// run ends as a shell reports it (127, 126) with the shell's complaint on
// stderr. Ending a sandbox kills every process it started, and with a
// confined tree every process rooted in it. Log keeps a stream whole for
// readers that resume at an offset (Modal's stdio reads, Daytona's session
// logs). A sandbox's commands share the host's network, so its ports are
// on the loopback address (Loopback, and Proxy for the wires' preview and
// port routes). Busybox finds the static busybox confinement needs, or
// says why tests must skip.
//
// It isolates nothing: it is a test double. Import it only from the fakes
// and test helpers.
package fakeengine
