package pid1

import (
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeOnExec marks every fd from 3 up close-on-exec, so that fds handed to
// the agent (the listener before it is wrapped, a pipe held for slirp4netns)
// do not leak into the commands it runs. They stay open in the agent.
func closeOnExec() error {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd < 3 {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
