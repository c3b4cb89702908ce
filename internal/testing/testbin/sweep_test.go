package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// sweep removes the build directories of test processes that are gone
// and of no one for an hour, and keeps those of live processes.
func TestSweep(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	live := exec.Command("sleep", "30")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()

	mk := func(name, owner string, age time.Duration) string {
		d := filepath.Join(os.TempDir(), dirPrefix+name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(d, ownerFile), []byte(owner), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		old := time.Now().Add(-age)
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
		return d
	}
	gone := mk("dead", strconv.Itoa(dead.Process.Pid), 0)
	orphan := mk("old-unowned", "", 2*time.Hour)
	kept := []string{
		mk("live", strconv.Itoa(live.Process.Pid), 0),
		mk("mine", strconv.Itoa(os.Getpid()), 0),
		mk("new-unowned", "", 0),
	}
	sweep()
	for _, d := range []string{gone, orphan} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s not removed (%v)", d, err)
		}
	}
	for _, d := range kept {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s removed: %v", d, err)
		}
	}
}
