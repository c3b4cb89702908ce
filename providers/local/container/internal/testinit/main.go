// Command testinit is the init the container tests run as PID 1: the agent
// serving a tiny handler on the listener inherited as fd 3. The tests build
// it with CGO_ENABLED=0 so that it runs in a busybox rootfs. Run as
// "testinit syscall NR ARG...", it makes one raw system call instead and
// prints its outcome (see rawSyscall).
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/berth-sh/berth/agent/pid1"
)

func main() {
	if len(os.Args) > 2 && os.Args[1] == "syscall" {
		os.Exit(rawSyscall(os.Args[2:]))
	}
	ln, err := pid1.ListenerFromFD(3)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var dl time.Time
	if s := os.Getenv("TESTINIT_DEADLINE"); s != "" {
		if dl, err = time.Parse(time.RFC3339Nano, s); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		h, _ := os.Hostname()
		fmt.Fprintf(w, "pid=%d host=%s", os.Getpid(), h)
	})
	// /exec?arg=...&arg=... runs a command and answers "exit=N\n" + output.
	mux.HandleFunc("/exec", func(w http.ResponseWriter, r *http.Request) {
		args := r.URL.Query()["arg"]
		if len(args) == 0 {
			http.Error(w, "no arg", http.StatusBadRequest)
			return
		}
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "exit=%d\n%s", code, out)
	})
	err = pid1.Run(context.Background(), pid1.Options{Listener: ln, Handler: mux, Deadline: dl})
	if err != nil && !errors.Is(err, pid1.ErrDeadline) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// rawSyscall makes the system call numbered args[0] with up to six integer
// arguments (Go integer literals, negative ones included; missing ones are
// 0) and prints "ok" or "errno=N": what a filter or the kernel answered.
func rawSyscall(args []string) int {
	var v [7]uintptr
	if len(args) > len(v) {
		fmt.Fprintln(os.Stderr, "at most six arguments")
		return 2
	}
	for i, a := range args {
		n, err := strconv.ParseInt(a, 0, 64)
		if err != nil {
			u, uerr := strconv.ParseUint(a, 0, 64)
			if uerr != nil {
				fmt.Fprintln(os.Stderr, "bad argument", a)
				return 2
			}
			n = int64(u)
		}
		v[i] = uintptr(n)
	}
	_, _, errno := syscall.Syscall6(v[0], v[1], v[2], v[3], v[4], v[5], v[6])
	if errno != 0 {
		fmt.Printf("errno=%d\n", int(errno))
	} else {
		fmt.Println("ok")
	}
	return 0
}
