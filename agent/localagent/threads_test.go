package localagent

import (
	"archive/tar"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"
	"golang.org/x/sys/unix"
)

// taskCreds is the Uid, Gid, Groups and CapEff lines of thread tid, or
// ok false once the thread has ended.
func taskCreds(tid int) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/status", tid))
	if err != nil {
		return "", false
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		for _, f := range []string{"Uid:", "Gid:", "Groups:", "CapEff:"} {
			if strings.HasPrefix(line, f) {
				out = append(out, strings.Join(strings.Fields(line), " "))
			}
		}
	}
	return strings.Join(out, "; "), true
}

// A transfer as another user hands its thread back to the runtime with
// the agent's own credentials (ids, groups, capabilities) instead of
// ending it: an ended thread is one the runtime must make again, which a
// full pids cgroup refuses.
func TestAsUserKeepsItsThread(t *testing.T) {
	nobody(t)
	var users accounts
	acct, err := users.lookup("nobody")
	if err != nil || acct == nil {
		t.Fatalf("lookup nobody: %v %v", acct, err)
	}
	own, _ := taskCreds(os.Getpid())
	for range 5 {
		var tid, fsuid int
		err := asUser(acct, func() error {
			tid = unix.Gettid()
			fsuid, _ = unix.SetfsuidRetUid(-1)
			return nil
		})
		if err != nil || fsuid != acct.uid {
			t.Fatalf("fn ran with fsuid %d (%v), want nobody's %d", fsuid, err, acct.uid)
		}
		// The runtime ends a locked thread right after its goroutine.
		for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			got, ok := taskCreds(tid)
			if !ok {
				t.Fatalf("thread %d ended after the transfer", tid)
			}
			if got != own {
				t.Fatalf("thread %d kept %q, want the agent's own %q", tid, got, own)
			}
		}
	}
}

// serveBudget serves a tree route for user with budget.
func serveBudget(t *testing.T, user string, b *threadBudget) TreeClient {
	ts := newTreeServer(testToken, user, b)
	srv := httptest.NewServer(ts)
	t.Cleanup(srv.Close)
	return TreeClient{HTTP: srv.Client(), BaseURL: srv.URL, Token: testToken}
}

// taken reports whether sem has no unit free, leaving it as it was.
func taken(sem *semaphore.Weighted) bool {
	if sem.TryAcquire(1) {
		sem.Release(1)
		return false
	}
	return true
}

// A transfer as the agent's own user holds its short slot only between
// network waits: while the client is slow to send, the slot is free. One
// as another user holds a dedicated slot for all of it, since its locked
// thread is taken all along.
func TestTransfersHoldSlots(t *testing.T) {
	for _, user := range []string{"", "nobody"} {
		t.Run("user="+user, func(t *testing.T) {
			if user != "" {
				nobody(t)
			}
			b := &threadBudget{short: semaphore.NewWeighted(1), dedicated: semaphore.NewWeighted(1)}
			c := serveBudget(t, user, b)
			dir := filepath.Join(t.TempDir(), "up")
			os.Chmod(filepath.Dir(dir), 0o777) // nobody writes here
			os.Chmod(filepath.Dir(filepath.Dir(dir)), 0o755)
			pr, pw := io.Pipe()
			done := make(chan error, 1)
			go func() { done <- c.Upload(ctx(t), dir, pr) }()
			tw := tar.NewWriter(pw)
			tw.WriteHeader(&tar.Header{Name: "f", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2})
			tw.Write([]byte("x"))
			tw.Flush()
			// Once f holds the first byte the agent waits for the second.
			deadline := time.Now().Add(10 * time.Second)
			for {
				if fi, err := os.Stat(filepath.Join(dir, "f")); err == nil && fi.Size() == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the agent never wrote the first byte")
				}
				time.Sleep(5 * time.Millisecond)
			}
			wantDedicated := user != ""
			for taken(b.short) || taken(b.dedicated) != wantDedicated {
				if time.Now().After(deadline) {
					t.Fatalf("while the body is pending: short slot taken %v, dedicated taken %v (want false, %v)",
						taken(b.short), taken(b.dedicated), wantDedicated)
				}
				time.Sleep(5 * time.Millisecond)
			}
			tw.Write([]byte("y"))
			tw.Close()
			pw.Close()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(got) != "xy" {
				t.Errorf("uploaded %q %v", got, err)
			}
			if taken(b.short) || taken(b.dedicated) {
				t.Error("a slot is still taken after the transfer")
			}
		})
	}
}
