package hostproc

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth/sandbox/errdefs"

	"github.com/berth-sh/berth/internal/syncbuf"
)

// holdForWriting starts another process that holds prog open for writing
// (as a process forked during prog's upload does until it execs) and
// returns once it does; release ends it and with it the descriptor.
func holdForWriting(t *testing.T, prog string) (release func()) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", `exec 3>>"$0"; echo holding; read x`, prog)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "holding\n" {
		t.Fatalf("the holder said %q, %v", line, err)
	}
	release = sync.OnceFunc(func() {
		in.Close()
		_ = cmd.Wait()
	})
	t.Cleanup(release)
	return release
}

func busyProgram(t *testing.T) string {
	prog := filepath.Join(t.TempDir(), "prog")
	writeFile(t, prog, "#!/bin/sh\necho ran\n", 0o755)
	return prog
}

// A program still open for writing in another process when it is started
// is refused with ETXTBSY until that process lets go; Start waits that
// out. On 5553f78 every engine failed here at once: "fork/exec ...: text
// file busy" (CI's providers/e2b TestSuite/ports/endpoint/none).
func TestStartWaitsOutTextFileBusy(t *testing.T) {
	prog := busyProgram(t)
	release := holdForWriting(t, prog)
	refused := 0
	// The holder lets go at the first refusal, and is gone when onBusy
	// returns: the next try must run the program.
	onBusy = func() { refused++; release() }
	defer func() { onBusy = nil }()
	var out syncbuf.Buffer
	p, err := Start(ctxT(t), Spec{Path: prog, Args: []string{"prog"}, Env: Environ(nil), Stdout: &out})
	if err != nil {
		t.Fatalf("start while the program was open for writing: %v", err)
	}
	if ex := p.Wait(); ex.Code != 0 || out.String() != "ran\n" {
		t.Fatalf("exit %+v, output %q; want 0 and the program's own", ex, out.String())
	}
	if refused != 1 {
		t.Errorf("refused %d times, want once (the holder held it, then let go)", refused)
	}
}

// A writer that never lets go is a clear, transient error after BusyWait.
func TestStartTextFileBusyIsBounded(t *testing.T) {
	prog := busyProgram(t)
	holdForWriting(t, prog)
	_, err := Start(ctxT(t), Spec{Path: prog, Args: []string{"prog"}})
	if !errors.Is(err, syscall.ETXTBSY) || errdefs.ClassOf(err) != errdefs.Unavailable {
		t.Fatalf("start while held for good: %v (class %v), want Unavailable wrapping ETXTBSY", err, errdefs.ClassOf(err))
	}
	if !strings.Contains(err.Error(), "text file busy") || !strings.Contains(err.Error(), "prog") {
		t.Errorf("error %q does not say what was busy", err)
	}
	if _, ok := ShellStatus(err); ok {
		t.Errorf("ShellStatus(%v) reads a busy file as the program's own failure", err)
	}
}

// The retry ends with ctx.
func TestStartTextFileBusyHonoursContext(t *testing.T) {
	prog := busyProgram(t)
	holdForWriting(t, prog)
	ctx, cancel := context.WithTimeout(ctxT(t), 50*time.Millisecond)
	defer cancel()
	_, err := Start(ctx, Spec{Path: prog, Args: []string{"prog"}})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, syscall.ETXTBSY) {
		t.Fatalf("start with a short ctx: %v, want ETXTBSY and ctx's deadline", err)
	}
}
