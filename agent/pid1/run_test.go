package pid1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/envd"
)

// helperEnv makes the test binary run the agent on the socket it names
// instead of the tests (see TestSIGTERMStopsRun).
const helperEnv = "BERTH_AGENT_TEST_SOCKET"

// helperDeadlineEnv gives that agent a deadline (RFC 3339); it then exits
// 4 when the deadline ends it.
const helperDeadlineEnv = "BERTH_AGENT_TEST_DEADLINE"

func TestMain(m *testing.M) {
	if sock := os.Getenv(helperEnv); sock != "" {
		var dl time.Time
		if s := os.Getenv(helperDeadlineEnv); s != "" {
			dl, _ = time.Parse(time.RFC3339Nano, s)
		}
		err := Run(context.Background(), Options{Socket: sock, Handler: http.NotFoundHandler(), Deadline: dl})
		if errors.Is(err, ErrDeadline) {
			os.Exit(4)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "agent:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	// Stand in for PID 1: orphans of the test's children come here, and
	// Run is told to reap them.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "subreaper:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// start runs Run in the background on a socket in a temp dir and waits
// until it answers. The returned func stops it and returns Run's error.
func start(t *testing.T, o Options) (sock string, stop func() error) {
	t.Helper()
	sock = filepath.Join(t.TempDir(), "agent.sock")
	o.Socket = sock
	if o.Handler == nil {
		o.Handler = http.NotFoundHandler()
	}
	o.Logf = t.Logf
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	for i := 0; ; i++ {
		if _, err := GetDeadline(context.Background(), sock, o.Token); err == nil {
			break
		}
		select {
		case err := <-done:
			cancel()
			t.Fatalf("Run returned early: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
		if i > 2000 {
			t.Fatal("agent never answered")
		}
	}
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() { cancel(); runErr = <-done })
		return runErr
	}
	t.Cleanup(func() { stop() })
	return sock, stop
}

func TestReapingDoesNotStealExecStatuses(t *testing.T) {
	_, stop := start(t, Options{Reap: true})
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := 0; i < 100; i++ {
		wg.Add(2)
		go func(i int) {
			defer wg.Done()
			// What the envd handler does: start, then Wait for the status.
			err := exec.Command("sh", "-c", "exit "+strconv.Itoa(i%50)).Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				errs <- fmt.Errorf("run %d: %w", i, err)
				return
			}
			if code != i%50 {
				errs <- fmt.Errorf("run %d: exit %d, want %d", i, code, i%50)
			}
		}(i)
		go func() {
			defer wg.Done()
			// An orphan: the background sleep outlives its shell.
			if err := exec.Command("sh", "-c", "sleep 0.01 &").Run(); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Every orphan is reaped in the end.
	for i := 0; ; i++ {
		z := zombieChildren()
		if len(z) == 0 {
			break
		}
		if i > 500 {
			t.Fatalf("zombies left: %v", z)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// zombieChildren lists this process's zombie children.
func zombieChildren() []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[0] == "Z" && f[1] == strconv.Itoa(os.Getpid()) {
			out = append(out, pid)
		}
	}
	return out
}

func TestDeadlineEndsRun(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	err := Run(context.Background(), Options{
		Socket: sock, Handler: http.NotFoundHandler(), Logf: t.Logf,
		Deadline: time.Now().Add(20 * time.Millisecond),
	})
	if !errors.Is(err, ErrDeadline) {
		t.Fatalf("Run = %v, want ErrDeadline", err)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
}

func TestSetDeadlineMovesIt(t *testing.T) {
	far := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	sock, stop := start(t, Options{Deadline: far})
	got, err := GetDeadline(context.Background(), sock, "")
	if err != nil || !got.Equal(far) {
		t.Fatalf("GetDeadline = %v, %v; want %v", got, err, far)
	}
	if err := SetDeadline(context.Background(), sock, "", time.Now().Add(20*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	// Run ends by itself, at the new deadline.
	done := make(chan error, 1)
	go func() { done <- stop() }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrDeadline) && err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not end at the moved deadline")
	}
}

func TestSetDeadlineRejectsGarbage(t *testing.T) {
	sock, _ := start(t, Options{})
	for _, body := range []string{`{"deadline":"tomorrow"}`, `not json`} {
		resp, err := unixPut(sock, body)
		if err != nil {
			t.Fatal(err)
		}
		if resp != http.StatusBadRequest {
			t.Errorf("PUT %s: status %d, want 400", body, resp)
		}
	}
	// No deadline was set by the rejected bodies.
	if got, err := GetDeadline(context.Background(), sock, ""); err != nil || !got.IsZero() {
		t.Fatalf("deadline %v, %v after rejected updates", got, err)
	}
}

// TestSIGTERMStopsRun runs the agent in a child process (the test binary
// again, see TestMain) and stops it with SIGTERM from outside, as the
// runtime or a person would.
func TestSIGTERMStopsRun(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+sock)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	for i := 0; ; i++ {
		if _, err := GetDeadline(context.Background(), sock, ""); err == nil {
			break
		}
		if i > 2000 {
			t.Fatal("agent process never answered")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("agent process after SIGTERM: %v, want a clean exit", err)
	}
}

func TestHandlerServed(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "envd:"+r.URL.Path) })
	sock, _ := start(t, Options{Handler: h})
	body, err := unixGet(sock, "/process.Process/List")
	if err != nil || body != "envd:/process.Process/List" {
		t.Fatalf("GET = %q, %v", body, err)
	}
}

func TestCloseOnExec(t *testing.T) {
	fd, err := unix.Open("/dev/null", unix.O_RDONLY, 0) // no O_CLOEXEC: inherited-like
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := closeOnExec(); err != nil {
		t.Fatal(err)
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		t.Fatal(err)
	}
	if flags&unix.FD_CLOEXEC == 0 {
		t.Fatal("fd not marked close-on-exec")
	}
	// Still open for the agent itself.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil {
		t.Fatalf("fd closed: %v", err)
	}
}

// The control endpoint answers only with the agent's token, so that a
// process that can reach the socket (a sandbox's, under runsc) cannot move
// or lift the deadline.
//
// On main at 6f9918d the endpoint took no token: anyone on the socket
// could lift the deadline.
func TestControlNeedsToken(t *testing.T) {
	far := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	sock, _ := start(t, Options{Deadline: far, Token: "s3cret"})
	for _, tok := range []string{"", "wrong"} {
		if err := SetDeadline(context.Background(), sock, tok, time.Time{}); err == nil {
			t.Errorf("SetDeadline with token %q succeeded", tok)
		}
		if _, err := GetDeadline(context.Background(), sock, tok); err == nil {
			t.Errorf("GetDeadline with token %q succeeded", tok)
		}
	}
	if got, err := GetDeadline(context.Background(), sock, "s3cret"); err != nil || !got.Equal(far) {
		t.Fatalf("deadline %v, %v; want %v, unmoved", got, err, far)
	}
}

// A connection the agent's own client dialled but has not used yet (a
// spare of a burst of calls, parked in its idle pool) is served for as
// long as that client may still use it. Before, the agent hung up on it
// after 10 s while the client kept it for 90 s, and under a fork bomb 1
// of 1000 file calls failed with a broken pipe (TestAttackForkBombWithFileCalls).
func TestClientSpareConnectionServed(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "served") })
	sock, _ := start(t, Options{Handler: h})
	idle := envd.UnixHTTPClient(sock).Transport.(*http.Transport).IdleConnTimeout
	if idle <= 0 || idle > time.Minute {
		t.Fatalf("the client keeps idle connections %v", idle)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(idle - 100*time.Millisecond)
	if _, err := io.WriteString(c, "GET /x HTTP/1.1\r\nHost: envd\r\n\r\n"); err != nil {
		t.Fatalf("the agent hung up on a connection its client still held: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the agent hung up on a connection its client still held: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "served" {
		t.Fatalf("answer %d %q", resp.StatusCode, body)
	}
}
