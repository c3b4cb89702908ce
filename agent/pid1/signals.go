package pid1

import (
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
)

// fatalSignals are the signals whose Go default ends the process when
// another process sends them: SIGHUP, SIGINT and SIGTERM exit; SIGQUIT,
// SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV, SIGSTKFLT and SIGSYS
// crash with a goroutine dump. SIGPIPE is here too: unhandled, a write to a
// closed stdout or stderr pipe exits the program. The other signals the
// runtime handles (SIGUSR1, SIGALRM, the real-time ones, ...) do nothing
// by default, and those it leaves at SIG_DFL (SIGCONT, SIGTSTP, ...) never
// reach a namespace's init from inside.
//
// A fault the program itself makes (a nil dereference) is still a panic or
// a crash: the runtime hands only signals sent by a process to a channel.
var fatalSignals = []os.Signal{
	unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGILL, unix.SIGTRAP,
	unix.SIGABRT, unix.SIGBUS, unix.SIGFPE, unix.SIGSEGV, unix.SIGPIPE,
	unix.SIGTERM, unix.SIGSTKFLT, unix.SIGSYS,
}

// dropFatalSignals catches fatalSignals and throws them away until the
// returned func is called.
//
// The kernel gives a pid namespace's init only the signals it handles (and
// SIGKILL or SIGSTOP from an ancestor namespace), so an init that handles
// none cannot be stopped from inside. The Go runtime handles them all, so
// as PID 1 the agent must catch the fatal ones itself, or any process of
// the sandbox ends the sandbox with `kill -TERM 1`.
//
// They are caught, not ignored (signal.Ignore): SIG_IGN survives exec, so
// every command the agent starts would begin with SIGTERM and SIGINT
// ignored, while a caught signal is reset to its default in the child.
func dropFatalSignals() (stop func()) {
	ch := make(chan os.Signal, 8)
	signal.Notify(ch, fatalSignals...)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ch:
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}
