package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/sandbox"
)

var execCases = []testCase{
	{name: "exit-codes", run: testExitCodes},
	{name: "stdout-apart-from-stderr", run: testStdoutStderr},
	{name: "streamed-output", run: testStreamed},
	{name: "stdin", run: testStdin},
	{name: "large-output", run: testLargeOutput},
	{name: "env", run: testEnv},
	{name: "cwd", run: testCwd},
	{name: "timeout", run: testTimeout},
	{name: "missing-program", run: testMissingProgram},
	{name: "signal", run: testSignal},
	{name: "bad-command", run: testBadCommand},
}

func testExitCodes(t *testing.T, h Harness) {
	ctx, _, sb := fresh(t, h)
	for _, code := range []int{0, 1, 42} {
		res := run(t, ctx, sb, sandbox.Command{Args: sh(fmt.Sprintf("exit %d", code))})
		if res.ExitCode != code {
			t.Errorf("exit %d: got exit code %d", code, res.ExitCode)
		}
	}
}

func testStdoutStderr(t *testing.T, h Harness) {
	ctx, _, sb := fresh(t, h)
	res := run(t, ctx, sb, sandbox.Command{Args: sh("printf out1; printf err1 >&2; printf out2; printf err2 >&2")})
	if got := string(res.Stdout); got != "out1out2" {
		t.Errorf("stdout = %q, want %q", got, "out1out2")
	}
	if got := string(res.Stderr); got != "err1err2" {
		t.Errorf("stderr = %q, want %q", got, "err1err2")
	}
}

// testStreamed proves output arrives while the process runs: the command
// prints, then waits for a file that the test writes only after it has seen
// the output, so the process cannot have ended when the bytes arrived.
func testStreamed(t *testing.T, h Harness) {
	ctx, _, sb := fresh(t, h)
	dir := workDir(t, ctx, sb)
	out := &syncBuffer{first: make(chan struct{})}
	p, err := sb.Exec(ctx, sandbox.Command{
		Args:   sh("echo first; while [ ! -e gate ]; do sleep 0.1 2>/dev/null || sleep 1; done; echo second"),
		Dir:    dir,
		Stdout: out,
	})
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	select {
	case <-out.first:
	case <-time.After(outputTimeout):
		// Let the process end so the test does not leak it.
		_ = sb.WriteFile(ctx, dir+"/gate", nil, 0o644)
		t.Fatalf("no output within %v while the process was running", outputTimeout)
	}
	if got := out.String(); got != "first\n" {
		t.Errorf("output before the gate = %q, want %q", got, "first\n")
	}
	if err := sb.WriteFile(ctx, dir+"/gate", nil, 0o644); err != nil {
		t.Fatalf("write gate: %v", err)
	}
	code, err := p.Wait(ctx)
	if err != nil || code != 0 {
		t.Fatalf("wait = %d, %v; want 0, nil", code, err)
	}
	if got := out.String(); got != "first\nsecond\n" {
		t.Errorf("output = %q, want %q", got, "first\nsecond\n")
	}
}

func testStdin(t *testing.T, h Harness) {
	ctx, _, sb := fresh(t, h)
	var in strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&in, "line %d\n", i)
	}
	res := run(t, ctx, sb, sandbox.Command{Args: []string{"cat"}, Stdin: strings.NewReader(in.String())})
	if res.ExitCode != 0 {
		t.Fatalf("cat exit code %d, stderr %q", res.ExitCode, res.Stderr)
	}
	if string(res.Stdout) != in.String() {
		t.Errorf("cat echoed %d bytes, want the %d bytes of stdin back", len(res.Stdout), in.Len())
	}
}

// zeroCounter counts bytes and the ones that are not zero.
type zeroCounter struct{ n, nonZero int64 }

func (c *zeroCounter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	for _, b := range p {
		if b != 0 {
			c.nonZero++
		}
	}
	return len(p), nil
}

func testLargeOutput(t *testing.T, h Harness) {
	ctx, _, sb := fresh(t, h)
	const size = 10 << 20
	var out zeroCounter
	var errOut syncBuffer
	res := run(t, ctx, sb, sandbox.Command{
		Args:   sh("dd if=/dev/zero bs=65536 count=160 2>/dev/null"),
		Stdout: &out, Stderr: &errOut,
	})
	if res.ExitCode != 0 {
		t.Fatalf("dd exit code %d, stderr %q", res.ExitCode, errOut.String())
	}
	if out.n != size || out.nonZero != 0 {
		t.Errorf("got %d bytes (%d not zero), want exactly %d zero bytes", out.n, out.nonZero, size)
	}
}

func testEnv(t *testing.T, h Harness) {
	p := open(t, h)
	sb := create(t, h, p, func(s *sandbox.Spec) {
		s.Env = map[string]string{"BERTH_SUITE_SPEC": "from-spec", "BERTH_SUITE_BOTH": "spec"}
	})
	ctx := testContext(t)
	res := run(t, ctx, sb, sandbox.Command{
		Args: sh(`printf '%s|%s|%s' "$BERTH_SUITE_SPEC" "$BERTH_SUITE_BOTH" "$BERTH_SUITE_CMD"`),
		Env:  map[string]string{"BERTH_SUITE_BOTH": "command", "BERTH_SUITE_CMD": "from-command"},
	})
	if got, want := string(res.Stdout), "from-spec|command|from-command"; got != want {
		t.Errorf("env seen by the command = %q, want %q (Spec env, then Command env winning)", got, want)
	}
	if res := run(t, ctx, sb, sandbox.Command{Args: sh(`command -v sh >/dev/null && printf ok`)}); string(res.Stdout) != "ok" {
		t.Errorf("PATH does not find sh: %q %q", res.Stdout, res.Stderr)
	}
}

func testCwd(t *testing.T, h Harness) {
	p := open(t, h)
	sb := create(t, h, p, func(s *sandbox.Spec) { s.WorkDir = "/tmp" })
	ctx := testContext(t)
	if err := sb.MakeDir(ctx, "/tmp"); err != nil && !errors.Is(err, sandbox.ErrAlreadyExists) {
		t.Fatalf("make /tmp: %v", err)
	}
	dir := workDir(t, ctx, sb)
	name := "cwd-" + randomHex(4) + ".txt"
	if err := sb.WriteFile(ctx, dir+"/"+name, []byte("in-dir"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, "/tmp/"+name, []byte("in-workdir"), 0o644); err != nil {
		t.Fatal(err)
	}
	removeAtEnd(t, sb, "/tmp/"+name)
	res := run(t, ctx, sb, sandbox.Command{Args: []string{"cat", name}, Dir: dir})
	if string(res.Stdout) != "in-dir" {
		t.Errorf("with Command.Dir: cat printed %q (stderr %q), want %q", res.Stdout, res.Stderr, "in-dir")
	}
	res = run(t, ctx, sb, sandbox.Command{Args: []string{"cat", name}})
	if string(res.Stdout) != "in-workdir" {
		t.Errorf("with Spec.WorkDir: cat printed %q (stderr %q), want %q", res.Stdout, res.Stderr, "in-workdir")
	}
}

// testTimeout bounds the wait with a cancellation, not a deadline, so that
// only the command's own Timeout can produce DeadlineExceeded.
func testTimeout(t *testing.T, h Harness) {
	_, _, sb := fresh(t, h)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stop := time.AfterFunc(commandDeadline, cancel)
	defer stop.Stop()
	_, err := sb.Run(ctx, sandbox.Command{Args: []string{"sleep", "30"}, Timeout: 500 * time.Millisecond})
	if errors.Is(err, context.Canceled) {
		t.Fatalf("the command's 500ms timeout did not end it within %v", commandDeadline)
	}
	wantClass(t, "command past its timeout", err, sandbox.DeadlineExceeded)
}

func testMissingProgram(t *testing.T, h Harness) {
	ctx, _, sb := fresh(t, h)
	res := run(t, ctx, sb, sandbox.Command{Args: []string{"berth-suite-no-such-program"}})
	if res.ExitCode != 127 {
		t.Errorf("missing program: exit code %d, want 127", res.ExitCode)
	}
	res = run(t, ctx, sb, sandbox.Command{Args: sh("berth-suite-no-such-program")})
	if res.ExitCode != 127 {
		t.Errorf("missing program in sh: exit code %d, want 127", res.ExitCode)
	}
}

// testSignal: with Capabilities.Signal a SIGKILL ends the command (137);
// without it Signal is NotSupported and the command runs on.
func testSignal(t *testing.T, h Harness) {
	ctx, p0, sb := fresh(t, h)
	p, err := sb.Exec(ctx, sandbox.Command{Args: []string{"sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	if !p0.Capabilities().Signal {
		wantClass(t, "signal without Capabilities.Signal", p.Signal(ctx, sandbox.SIGKILL), sandbox.NotSupported)
		return
	}
	if err := p.Signal(ctx, sandbox.SIGKILL); err != nil {
		t.Fatalf("signal: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, commandDeadline)
	defer cancel()
	code, err := p.Wait(wctx)
	if err != nil || code != 137 {
		t.Fatalf("wait after SIGKILL = %d, %v; want 137 (128+9), nil", code, err)
	}
	wantClass(t, "signal to an ended process", p.Signal(ctx, sandbox.SIGKILL), sandbox.NotFound)
}

func testBadCommand(t *testing.T, h Harness) {
	ctx, _, sb := fresh(t, h)
	_, err := sb.Exec(ctx, sandbox.Command{})
	wantClass(t, "exec without args", err, sandbox.InvalidArgument)
	_, err = sb.Exec(ctx, sandbox.Command{Args: []string{"true"}, Timeout: -time.Second})
	wantClass(t, "exec with a negative timeout", err, sandbox.InvalidArgument)
}
