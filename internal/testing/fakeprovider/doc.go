// Package fakeprovider is a fault-injecting sandbox provider for tests: the
// runner's, the server's and the sandbox package's own. Import it only from
// _test.go files; tests register it themselves with
// registry.Entry{Open: ...} around New, so no binary ever carries it.
//
// It is berth's driver interface in front of internal/testing/fakeengine,
// which holds the sandboxes: a sandbox is a directory under
// Options.StateDir whose root/ tree is its "/", and file calls resolve in
// it as inside the sandbox, so nothing reaches the rest of the host by a
// symlink. Every provider value of this process on the same state dir
// sees the same sandboxes (Connect, List, Delete). Exec runs real host
// processes, each in its own process group, in the mapped working
// directory; the programs are the host's, the environment is only the
// Spec's and the Command's plus a PATH; Command.User is ignored. When a
// command's leader exits, what it left running in its group is killed, so
// its output is complete. It isolates nothing: it is a test double, not a
// sandbox.
//
// Faults are steered at run time through an Injector shared with the test.
package fakeprovider
