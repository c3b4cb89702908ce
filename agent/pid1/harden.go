package pid1

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Harden makes this process non-dumpable. A non-dumpable process can be
// ptraced, have its memory read or written (process_vm_readv/writev,
// /proc/PID/mem), its environment and fds read (/proc/PID/environ, fd/) or
// its fds taken (pidfd_getfd) only by a process with CAP_SYS_PTRACE, which
// no process of a sandbox has, even as root in it. The flag holds until
// exec (the agent never execs itself) and also covers the threads the Go
// runtime makes later. Call it first thing: a pooled agent lives long
// before its sandbox is handed out.
func Harden() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("agent: make the process non-dumpable: %w", err)
	}
	return nil
}
