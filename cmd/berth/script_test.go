package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/providers/local/image/seed"
)

// TestMain lets the scripts run the berth binary: testscript re-executes
// this test binary as "berth" and calls main.
func TestMain(m *testing.M) {
	testscript.Main(cleanupM{m}, map[string]func(){"berth": main})
}

// cleanupM removes what the tests built once they have run (testscript.Main
// exits the process itself).
type cleanupM struct{ m *testing.M }

func (c cleanupM) Run() int {
	code := c.m.Run()
	testbin.Cleanup()
	return code
}

// localEnv gives a script what the local provider needs, when the host can
// run it (root and runc): a short state dir of its own (the agent's socket
// path lives under it), the static berth binary as the agent
// (BERTH_AGENT_BINARY; the test binary is linked with cgo), and a busybox
// rootfs tar to import (BUSYBOX_TAR).
func localEnv(env *testscript.Env) error {
	if testbin.LocalMissing() != "" {
		return nil
	}
	bin, err := testbin.Berth()
	if err != nil {
		return err
	}
	agent, err := testbin.Agent()
	if err != nil {
		return err
	}
	state, err := os.MkdirTemp("", "berth-cli-")
	if err != nil {
		return err
	}
	env.Defer(func() { removeState(state, bin) })
	tarPath := filepath.Join(env.WorkDir, "busybox-rootfs.tar")
	f, err := os.Create(tarPath)
	if err != nil {
		return err
	}
	err = seed.BusyboxTar(f, "")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	env.Setenv(local.EnvStateDir, state)
	env.Setenv(local.EnvAgentBinary, agent)
	env.Setenv("BUSYBOX_TAR", tarPath)
	return nil
}

// TestScripts runs testdata/script/*.txtar. Each script starts with an
// environment of only WORK, PATH, TMPDIR and HOME, and HOME is an empty
// directory of its own.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			home := filepath.Join(env.WorkDir, "home")
			if err := os.Mkdir(home, 0o700); err != nil {
				return err
			}
			env.Setenv("HOME", home)
			// BERTHBIN is the directory holding berth alone, for scripts
			// that need a PATH without the host's binaries.
			p, err := exec.LookPath("berth")
			if err != nil {
				return err
			}
			env.Setenv("BERTHBIN", filepath.Dir(p))
			return localEnv(env)
		},
		Condition: func(cond string) (bool, error) {
			if cond == "root" {
				return os.Geteuid() == 0, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits":     cmdExits,
			"httpserve": cmdHTTPServe,
			"flatjson":  cmdFlatJSON,
			"jsonget":   cmdJSONGet,
			"portget":   cmdPortGet,
			"setstdout": cmdSetStdout,
		},
	})
}

// removeState deletes what a failed script left running before removing
// its state dir: never walk into a live sandbox's mounted rootfs.
func removeState(dir, agent string) {
	ctx := context.Background()
	if d, err := local.New(local.Options{StateDir: dir, AgentBinary: agent}); err == nil {
		infos, _ := d.List(ctx, nil)
		for _, in := range infos {
			_ = d.Delete(ctx, in.ID)
		}
		_, _ = d.Reap(ctx)
	}
	os.RemoveAll(dir)
}

// setstdout VAR sets VAR to the last command's stdout, trimmed (an id
// printed by "berth sandboxes create").
func cmdSetStdout(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: setstdout VAR")
	}
	ts.Setenv(args[0], strings.TrimSpace(ts.ReadFile("stdout")))
}

// exits CODE PROG ARGS... runs PROG and requires exit status CODE exactly
// (testscript's "! exec" only tells zero from non-zero).
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits CODE PROG [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("%s: %v", args[1], err)
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

// httpserve STATUS VAR starts an HTTP server on loopback that answers every
// request with STATUS, sets VAR to its base URL and VAR_ADDR to its
// host:port, and appends "METHOD PATH"
// of each request, with the names of the headers it carried, to
// $WORK/requests-VAR.log.
func cmdHTTPServe(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: httpserve STATUS VAR")
	}
	status, err := strconv.Atoi(args[0])
	ts.Check(err)
	logPath := ts.MkAbs("requests-" + args[1] + ".log")
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		f, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			fmt.Fprintf(f, "%s %s", r.Method, r.URL.RequestURI())
			for k, vs := range r.Header {
				fmt.Fprintf(f, " %s=%s", k, strings.Join(vs, ","))
			}
			fmt.Fprintln(f)
			f.Close()
		}
		w.WriteHeader(status)
	}))
	ts.Defer(srv.Close)
	ts.Setenv(args[1], srv.URL)
	ts.Setenv(args[1]+"_ADDR", srv.Listener.Addr().String())
}

// flatjson FILE KEY=VALUE... requires FILE (or stdout) to be one JSON object
// whose values are all strings and whose keys are exactly the given ones,
// with those values.
func cmdFlatJSON(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: flatjson FILE [KEY=VALUE...]")
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(ts.ReadFile(args[0])), &obj); err != nil {
		ts.Fatalf("%s is not a JSON object: %v", args[0], err)
	}
	want := map[string]string{}
	for _, kv := range args[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			ts.Fatalf("flatjson: %q is not KEY=VALUE", kv)
		}
		want[k] = v
	}
	for k, v := range obj {
		s, ok := v.(string)
		if !ok {
			ts.Fatalf("%s: value of %s is %T, want a string (a flat object)", args[0], k, v)
		}
		w, ok := want[k]
		if !ok {
			ts.Fatalf("%s: unexpected key %s=%q", args[0], k, s)
		}
		if s != w {
			ts.Fatalf("%s: %s=%q, want %q", args[0], k, s, w)
		}
	}
	for k := range want {
		if _, ok := obj[k]; !ok {
			ts.Fatalf("%s: missing key %s", args[0], k)
		}
	}
}

// jsonget FILE QUERY WANT requires the value at QUERY in FILE (or stdout)
// to print as WANT. QUERY is dot-separated: an object key, an array index,
// or name=X to pick the array element whose "name" is X. A value that is
// not a string is compared in its JSON form; "#" after a path gives the
// length of an array.
func cmdJSONGet(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: jsonget FILE QUERY WANT")
	}
	var v any
	if err := json.Unmarshal([]byte(ts.ReadFile(args[0])), &v); err != nil {
		ts.Fatalf("%s is not JSON: %v", args[0], err)
	}
	for _, seg := range strings.Split(args[1], ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[seg]; !ok {
				ts.Fatalf("%s: no key %q on the way to %s", args[0], seg, args[1])
			}
		case []any:
			if seg == "#" {
				v = float64(len(x))
				continue
			}
			if name, ok := strings.CutPrefix(seg, "name="); ok {
				v = nil
				for _, el := range x {
					if m, _ := el.(map[string]any); m != nil && m["name"] == name {
						v = el
					}
				}
				if v == nil {
					ts.Fatalf("%s: no element named %q", args[0], name)
				}
				continue
			}
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				ts.Fatalf("%s: bad index %q into an array of %d", args[0], seg, len(x))
			}
			v = x[i]
		default:
			ts.Fatalf("%s: %q reaches into a %T", args[0], seg, v)
		}
	}
	got, ok := v.(string)
	if !ok {
		b, _ := json.Marshal(v)
		got = string(b)
	}
	if (got == args[2]) == neg {
		ts.Fatalf("%s: %s is %s; want %s%s", args[0], args[1], got, map[bool]string{true: "not ", false: ""}[neg], args[2])
	}
}
