package busyroot

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// KillRooted sends SIGKILL to every process whose root directory is root:
// the fakes end a sandbox's processes this way, so that one that left its
// command's process group (setsid, a daemon) dies with the sandbox, as it
// does with a real one.
func KillRooted(root string) {
	want, err := filepath.EvalSymlinks(root)
	if err != nil || want == "/" {
		return
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if r, err := os.Readlink(filepath.Join("/proc", e.Name(), "root")); err == nil && r == want {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
