package daytona_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/providers/daytona"
	"github.com/berth-sh/berth/providers/daytona/daytonatest"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// TestSchema walks every request the driver sends, and every answer the
// fake gives it, through the models of Daytona's generated clients (read
// from the installed SDK): an unknown, misspelt or wrongly typed field, a
// missing required one, an unknown route or query parameter fails. The
// mutation cases show that one changed field is caught.
func TestSchema(t *testing.T) {
	schema := daytonatest.LoadSchema(t)
	needCommands(t)
	exchanges := driveEverything(t)
	t.Run("driver and fake", func(t *testing.T) {
		seen := map[string]bool{}
		for _, e := range exchanges {
			if _, op, _ := schema.Route(e); op != nil {
				seen[op.Name] = true
			}
			for _, err := range schema.Check(e) {
				t.Error(err)
			}
		}
		// The walk covered every call the driver makes.
		for _, op := range []string{
			"createSandbox", "getSandbox", "listSandboxes", "deleteSandbox", "startSandbox", "stopSandbox",
			"pauseSandbox", "forkSandbox", "setTtl", "getToolboxProxyUrl", "getBuildLogs",
			"createSession", "sessionExecuteCommand", "getSessionCommand", "getSessionCommandLogs", "sendInput",
			"deleteSession", "executeCommand", "uploadFiles", "downloadFile", "getFileInfo", "listFiles",
			"createFolder", "deleteFile", "setFilePermissions", "getSignedPortPreviewUrl", "updateLastActivity",
		} {
			if !seen[op] {
				t.Errorf("the walk never called %s; it called %v", op, slices.Sorted(maps.Keys(seen)))
			}
		}
	})
	t.Run("a field renamed in a request", func(t *testing.T) {
		e := find(t, schema, exchanges, "createSandbox")
		e.Request = bytes.Replace(e.Request, []byte(`"autoDeleteInterval"`), []byte(`"autoDeleteIntervall"`), 1)
		wantCaught(t, schema, e, `unknown field "autoDeleteIntervall"`)
	})
	t.Run("a field mistyped in a request", func(t *testing.T) {
		e := find(t, schema, exchanges, "createSandbox")
		e.Request = mutate(t, e.Request, func(m map[string]any) { m["ttlMinutes"] = "60" })
		wantCaught(t, schema, e, `ttlMinutes: string "60", want a number`)
	})
	t.Run("a field removed from an answer", func(t *testing.T) {
		e := find(t, schema, exchanges, "getSandbox")
		e.Response = mutate(t, e.Response, func(m map[string]any) { delete(m, "toolboxProxyUrl") })
		wantCaught(t, schema, e, `required field "toolboxProxyUrl" is missing`)
	})
	t.Run("a state the API does not have", func(t *testing.T) {
		e := find(t, schema, exchanges, "getSandbox")
		e.Response = mutate(t, e.Response, func(m map[string]any) { m["state"] = "running" })
		wantCaught(t, schema, e, `string "running" is not a SandboxState`)
	})
	t.Run("a route no client calls", func(t *testing.T) {
		e := find(t, schema, exchanges, "uploadFiles")
		e.Path = strings.Replace(e.Path, "/files/bulk-upload", "/files/upload", 1)
		wantCaught(t, schema, e, "no operation of the toolbox client")
	})
}

// driveEverything runs every call of the driver against a fake that
// records the exchanges, and returns them.
func driveEverything(t *testing.T) []daytonatest.Exchange {
	srv := newServer(t, daytonatest.Options{Record: true, PageSize: 1, RefuseDeleteStarted: true, SnapshotClasses: map[string]string{vmSnapshot: "linux-vm"}})
	d := openDriver(t, srv, func(o *daytona.Options) { o.PollMin = 5 * time.Millisecond })
	p := sandbox.NewProvider("daytona", d)
	ctx := t.Context()
	spec := sandbox.Spec{
		Image: "busybox:1.36", Labels: map[string]string{"walk": "1"}, Env: map[string]string{"A": "1"}, WorkDir: "/tmp",
		Resources: sandbox.Resources{CPUs: 1, MemoryMB: 1024, StorageMB: 3072}, TTL: time.Hour,
		Network: sandbox.Network{Mode: sandbox.NetworkAllowlist, Allow: []string{"10.0.0.0/8", "pypi.org"}},
	}
	sb := must(p.Create(ctx, spec))
	defer sb.Close()
	res := must(sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", "cat; echo err >&2"}, Stdin: strings.NewReader("in\n")}))
	if string(res.Stdout) != "in\n" || string(res.Stderr) != "err\n" {
		t.Fatalf("run: %q %q", res.Stdout, res.Stderr)
	}
	// A dropped stream makes the driver read the whole log.
	srv.DropStreams(1, 1)
	if res := must(sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", "echo polled"}})); string(res.Stdout) != "polled\n" {
		t.Fatalf("polled run: %q", res.Stdout)
	}
	proc := must(sb.Exec(ctx, sandbox.Command{Args: []string{"sleep", "30"}}))
	time.Sleep(100 * time.Millisecond)
	if err := proc.Signal(ctx, sandbox.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, _ := proc.Wait(ctx); code != 143 {
		t.Fatalf("signalled: exit %d", code)
	}
	check(t, sb.WriteFile(ctx, "/tmp/walk/f.txt", []byte("data"), 0o640))
	if got := must(sb.ReadFile(ctx, "/tmp/walk/f.txt")); string(got) != "data" {
		t.Fatalf("read %q", got)
	}
	must(sb.Stat(ctx, "/tmp/walk/f.txt"))
	must(sb.ListDir(ctx, "/tmp/walk"))
	check(t, sb.MakeDir(ctx, "/tmp/walk/d"))
	check(t, sb.Remove(ctx, "/tmp/walk"))
	check(t, sb.SetTimeout(ctx, 2*time.Hour))
	must(sb.Endpoint(ctx, sandbox.Port{Number: 8000})) // and the activity refresh it starts
	must(p.List(ctx, map[string]string{"walk": "1"}))
	again := must(p.Connect(ctx, sb.ID()))
	again.Close()

	vm := must(p.Create(ctx, sandbox.Spec{Image: daytona.SnapshotPrefix + vmSnapshot, Labels: map[string]string{"walk": "1"}}))
	defer vm.Close()
	check(t, vm.Pause(ctx))
	check(t, vm.Resume(ctx))
	fork := must(vm.Fork(ctx))
	defer fork.Close()
	check(t, fork.Delete(ctx))
	check(t, vm.Delete(ctx))

	srv.FailBuilds(1, "#1 ERROR: pull access denied\n")
	if _, err := p.Create(ctx, sandbox.Spec{Image: "nope:1"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("failed build: %v", err)
	}
	check(t, sb.Delete(ctx))
	return srv.Exchanges()
}

// must stops the walk at the first failure (a panic, which the test
// reports with the error).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// find returns the first exchange of an operation that has a body.
func find(t *testing.T, s *daytonatest.Schema, es []daytonatest.Exchange, op string) daytonatest.Exchange {
	t.Helper()
	for _, e := range es {
		if _, o, _ := s.Route(e); o != nil && o.Name == op && e.Status < 300 {
			if errs := s.Check(e); len(errs) != 0 {
				t.Fatalf("the unmutated %s exchange already fails: %v", op, errs)
			}
			return e
		}
	}
	t.Fatalf("no %s exchange recorded", op)
	return daytonatest.Exchange{}
}

func mutate(t *testing.T, body []byte, f func(map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	f(m)
	out, _ := json.Marshal(m)
	return out
}

func wantCaught(t *testing.T, s *daytonatest.Schema, e daytonatest.Exchange, want string) {
	t.Helper()
	errs := s.Check(e)
	for _, err := range errs {
		if strings.Contains(err.Error(), want) {
			return
		}
	}
	t.Fatalf("the mutation went through: errors %v, want one saying %q", errs, want)
}
