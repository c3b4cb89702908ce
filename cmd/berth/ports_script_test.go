package main

import (
	"bufio"
	"context"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/berth-sh/berth/internal/testing/nettest"
	"github.com/berth-sh/berth/providers/local"
)

// portget ID PORT WANT runs "berth port ID PORT" until it has printed its
// URL, GETs the URL (retrying while the server inside starts) and requires
// WANT in the body, then stops berth with SIGTERM and requires a clean
// exit: the local endpoint works while the verb runs and the verb ends
// without an error when told to.
func cmdPortGet(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: portget ID PORT WANT")
	}
	bin, err := exec.LookPath("berth")
	ts.Check(err)
	cmd := exec.Command(bin, "port", args[0], args[1])
	cmd.Dir = ts.Getenv("WORK")
	for _, k := range []string{"PATH", "HOME", "TMPDIR", local.EnvStateDir, local.EnvAgentBinary} {
		cmd.Env = append(cmd.Env, k+"="+ts.Getenv(k))
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	ts.Check(err)
	ts.Check(cmd.Start())
	done := false
	defer func() {
		if !done {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		ts.Fatalf("berth port printed no URL: %v\n%s", err, stderr.String())
	}
	url := strings.TrimSpace(line)
	ts.Logf("endpoint %s", url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var body string
	for {
		body, err = nettest.Get(ctx, url)
		if err == nil && strings.Contains(body, args[2]) {
			break
		}
		if ctx.Err() != nil {
			ts.Fatalf("GET %s: %v %q, want %q", url, err, body, args[2])
		}
		time.Sleep(100 * time.Millisecond)
	}
	ts.Check(cmd.Process.Signal(syscall.SIGTERM))
	err = cmd.Wait()
	done = true
	if err != nil {
		ts.Fatalf("berth port after SIGTERM: %v\n%s", err, stderr.String())
	}
	if _, err := nettest.Get(context.Background(), url); err == nil {
		ts.Fatalf("%s still answers after berth port ended", url)
	}
}
