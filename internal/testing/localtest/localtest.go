package localtest

import (
	"bufio"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/berth-sh/berth/providers/local"
)

// Sweep runs at the end of a package's tests. It lists what they left:
// directories under each state dir's sandboxes/, mounts under each state
// dir, and cgroups under base.CgroupParent. Then it deletes every sandbox
// in each state dir, live or ended (opening the provider there with base's
// other options), removes each state dir no mount is left under, and
// removes the cgroup parent. State dirs that no longer exist are skipped.
func Sweep(base local.Options, states ...string) []string {
	var left []string
	var live []string
	for _, state := range states {
		if _, err := os.Stat(state); err != nil {
			continue // removed by its test
		}
		live = append(live, state)
		ents, _ := os.ReadDir(filepath.Join(state, "sandboxes"))
		for _, e := range ents {
			left = append(left, "sandbox dir "+filepath.Join(state, "sandboxes", e.Name()))
		}
		left = append(left, MountsUnder(state)...)
	}
	cgs := CgroupDirs(base.CgroupParent)
	for _, d := range cgs {
		kids, _ := os.ReadDir(d)
		for _, k := range kids {
			if k.IsDir() {
				left = append(left, "cgroup "+filepath.Join(d, k.Name()))
			}
		}
	}
	for _, state := range live {
		// Never walk into a live sandbox's root: delete what is left first.
		removeSandboxes(base, state)
		if len(MountsUnder(state)) == 0 {
			os.RemoveAll(state)
		}
	}
	for _, d := range cgs {
		os.Remove(d)
	}
	return left
}

// removeSandboxes deletes every sandbox in state, live or ended.
func removeSandboxes(base local.Options, state string) {
	base.StateDir = state
	p, err := local.New(base)
	if err != nil {
		return
	}
	defer p.Close()
	ctx := context.Background()
	infos, _ := p.List(ctx, nil)
	for _, in := range infos {
		_ = p.Delete(ctx, in.ID)
	}
	_, _ = p.Reap(ctx)
}

// MountsUnder returns "mount <point>" for each mount point in
// /proc/self/mountinfo that is dir or under it.
func MountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return []string{"read mountinfo: " + err.Error()}
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 4 && (fs[4] == dir || strings.HasPrefix(fs[4], dir+"/")) {
			out = append(out, "mount "+fs[4])
		}
	}
	return out
}

// CgroupDirs finds the directories called name in the cgroup file systems
// (one per hierarchy on cgroup v1, one on v2). An empty name finds none.
func CgroupDirs(name string) []string {
	if name == "" {
		return nil
	}
	var out []string
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if d.Name() == name {
			out = append(out, p)
			return fs.SkipDir
		}
		if strings.Count(p, "/") > 10 {
			return fs.SkipDir
		}
		return nil
	})
	return out
}
