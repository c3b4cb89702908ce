// Command attacker is what the local provider's attack tests run inside
// sandboxes (built static by the tests; see attackerBinary). Each verb is
// one attack; it prints one line per attempt, "NAME: refused (ERR)" or
// "NAME: ALLOWED", and never fails for an attack that is refused.
package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: attacker race|pid1|socket|newcalls ...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "race":
		race(os.Args[2], atoi(os.Args[3]), os.Args[4])
	case "pid1":
		pid1()
	case "deadline":
		liftDeadline(os.Args[2])
	case "socket":
		for _, a := range os.Args[2:] {
			socket(atoi(a))
		}
	case "newcalls":
		newCalls()
	default:
		fmt.Fprintln(os.Stderr, "unknown verb", os.Args[1])
		os.Exit(2)
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	return n
}

func report(name string, err error) {
	if err != nil {
		fmt.Printf("%s: refused (%v)\n", name, err)
	} else {
		fmt.Printf("%s: ALLOWED\n", name)
	}
}

// race waits for each FIFO dir/f0000 ... dir/fN-1 to appear (a build's
// ADD making them from the host) and at once puts a symlink to target in
// its place, so that whatever the host does next to that name goes to
// target if it follows links. It runs until it is killed.
func race(dir string, n int, target string) {
	tmp := filepath.Join(dir, ".swap")
	for {
		for i := 0; i < n; i++ {
			name := filepath.Join(dir, fmt.Sprintf("f%05d", i))
			_ = unix.Symlink(target, tmp) // ready before the FIFO comes
			deadline := time.Now().Add(500 * time.Millisecond)
			var st unix.Stat_t
			for time.Now().Before(deadline) {
				if unix.Lstat(name, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO {
					_ = unix.Rename(tmp, name)
					break
				}
			}
		}
	}
}

// pid1 tries every way to reach into the sandbox's init (the agent, which
// holds the deadline and the host's socket) from a process of the sandbox.
func pid1() {
	err := unix.PtraceAttach(1)
	report("ptrace-attach", err)
	if err == nil {
		// Let it go again, or the agent stays stopped and the test hangs.
		var ws unix.WaitStatus
		_, _ = unix.Wait4(1, &ws, unix.WALL, nil)
		_ = unix.PtraceDetach(1)
	}
	buf := make([]byte, 8)
	local := []unix.Iovec{{Base: &buf[0], Len: 8}}
	remote := []unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&buf[0])), Len: 8}}
	// The addresses are this process's, so a permitted call fails with
	// EFAULT: that is a success of the attack.
	_, err = unix.ProcessVMReadv(1, local, remote, 0)
	report("process_vm_readv", permitted(err, unix.EFAULT))
	_, err = unix.ProcessVMWritev(1, local, remote, 0)
	report("process_vm_writev", permitted(err, unix.EFAULT))
	// A pidfd of PID 1 is no attack by itself (signals to an init are
	// the kernel's to filter); taking the init's fds with it is.
	pfd, err := unix.PidfdOpen(1, 0)
	fmt.Printf("pidfd_open: %v\n", err)
	if err == nil {
		_, err = unix.PidfdGetfd(pfd, 3, 0)
		report("pidfd_getfd", err)
	} else {
		fmt.Println("pidfd_getfd: refused (no pidfd)")
	}
	for _, f := range []string{"environ", "mem", "maps", "fd/3"} {
		fd, err := unix.Open("/proc/1/"+f, unix.O_RDONLY, 0)
		if err == nil {
			unix.Close(fd)
		}
		// A socket's fd cannot be opened (ENXIO), but only once the
		// permission check let the attacker see it.
		report("open /proc/1/"+f, permitted(err, unix.ENXIO))
	}
	_, err = os.Readlink("/proc/1/exe")
	report("readlink /proc/1/exe", err)
}

// liftDeadline asks the agent listening on sock to drop its deadline, as
// the host's SetTimeout does, with no token.
func liftDeadline(sock string) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		report("deadline", err)
		return
	}
	defer c.Close()
	body := `{"deadline":""}`
	fmt.Fprintf(c, "PUT /berth.agent/deadline HTTP/1.1\r\nHost: agent\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		report("deadline", err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		report("deadline", nil)
		return
	}
	report("deadline", fmt.Errorf("%s", resp.Status))
}

// permitted turns the errno that means "the permission check passed" into
// success.
func permitted(err error, passed unix.Errno) error {
	if err == passed {
		return nil
	}
	return err
}

// socket tries a socket of family with each type.
func socket(family int) {
	var last error
	for _, typ := range []int{unix.SOCK_STREAM, unix.SOCK_DGRAM, unix.SOCK_SEQPACKET, unix.SOCK_RAW} {
		fd, err := unix.Socket(family, typ, 0)
		if err == nil {
			unix.Close(fd)
			report("socket "+strconv.Itoa(family), nil)
			return
		}
		last = err
	}
	report("socket "+strconv.Itoa(family), last)
}

// newCalls makes system calls newer than the libseccomp of many hosts
// (2.5.4 on Debian 12 knows none of them), so that a filter naming them
// cannot refuse them. A call reached the kernel unless it failed with
// ENOSYS or EPERM, what a filter answers: an fd from open_tree_attr (an
// O_PATH-like handle on /), any other answer from the rest.
func newCalls() {
	root := []byte("/\x00")
	size := uint32(0)
	cwd := unix.AT_FDCWD
	for _, c := range []struct {
		name string
		nr   uintptr
		args [6]uintptr
	}{
		{"open_tree_attr", unix.SYS_OPEN_TREE_ATTR, [6]uintptr{uintptr(cwd), uintptr(unsafe.Pointer(&root[0])), unix.OPEN_TREE_CLOEXEC}},
		{"lsm_get_self_attr", unix.SYS_LSM_GET_SELF_ATTR, [6]uintptr{100, 0, uintptr(unsafe.Pointer(&size))}}, // LSM_ATTR_CURRENT
		{"lsm_set_self_attr", unix.SYS_LSM_SET_SELF_ATTR, [6]uintptr{100, 0, 0}},
		{"lsm_list_modules", unix.SYS_LSM_LIST_MODULES, [6]uintptr{0, uintptr(unsafe.Pointer(&size))}},
		{"listns", unix.SYS_LISTNS, [6]uintptr{0, 0, 0}},
	} {
		r, _, errno := unix.Syscall6(c.nr, c.args[0], c.args[1], c.args[2], c.args[3], c.args[4], c.args[5])
		switch {
		case errno == 0:
			if c.nr == unix.SYS_OPEN_TREE_ATTR {
				unix.Close(int(r))
			}
			report(c.name, nil)
		case errno == unix.ENOSYS || errno == unix.EPERM:
			report(c.name, errno)
		default:
			fmt.Fprintf(os.Stderr, "%s: the kernel answered %v\n", c.name, errno)
			report(c.name, nil)
		}
	}
}
