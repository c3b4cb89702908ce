// Command testinit is the init the container tests run as PID 1: the agent
// serving a tiny handler on the listener inherited as fd 3. The tests build
// it with CGO_ENABLED=0 so that it runs in a busybox rootfs.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/berth-sh/berth/sandboxinit"
)

func main() {
	ln, err := sandboxinit.ListenerFromFD(3)
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
	err = sandboxinit.Run(context.Background(), sandboxinit.Options{Listener: ln, Handler: mux, Deadline: dl})
	if err != nil && !errors.Is(err, sandboxinit.ErrDeadline) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
