package container

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Names inside Config.Dir of a container that SwitchRoot gave a root.
const (
	rootDir      = "root" // the new root's overlay, mounted on the host too
	rootUpperDir = "root-upper"
	rootWorkDir  = "root-work"
)

// SwitchPoint is where, in a blank root, SwitchRoot mounts the new root
// before the container's mount namespace pivots into it.
const SwitchPoint = "/.switch-root"

// MakeBlankRoot returns a blank root for containers configured as c, to
// be their one lower directory (Config.Blank): a directory under dir that
// holds SwitchPoint and the mount points of c's spec (proc, dev, sys, the
// /etc files, the init binary and c.Mounts), so that the runtime writes nothing
// into each container's upper directory and teardown has nothing there to
// remove. It is made once per set of mount points (dir/<digest>), by a
// rename, and never changed after: a lower directory must not change under
// a mounted overlay.
func MakeBlankRoot(dir string, c *Config) (string, error) {
	type point struct {
		path string
		dir  bool
	}
	// The spec's own list, less what lands inside another mount
	// (dev/pts and the like live in dev's tmpfs).
	points := []point{{SwitchPoint, true}}
	var tops []string
	for _, m := range mounts(c, filepath.Join(c.Dir, etcDir)) {
		dest := path.Clean(m.Destination)
		if slices.ContainsFunc(tops, func(top string) bool { return strings.HasPrefix(dest, top+"/") }) {
			continue
		}
		tops = append(tops, dest)
		dir := m.Type != "bind"
		if m.Type == "bind" {
			// A file unless the source is a directory: the /etc files,
			// written at Create, do not exist yet.
			if fi, err := os.Stat(m.Source); err == nil {
				dir = fi.IsDir()
			}
		}
		points = append(points, point{dest, dir})
	}
	sort.Slice(points, func(i, j int) bool { return points[i].path < points[j].path })
	h := sha256.New()
	for _, p := range points {
		fmt.Fprintf(h, "%s %t\n", p.path, p.dir)
	}
	root := filepath.Join(dir, hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(root); err == nil {
		return root, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("make blank root: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, ".tmp-")
	if err != nil {
		return "", fmt.Errorf("make blank root: %w", err)
	}
	defer os.RemoveAll(tmp) // gone after the rename
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("make blank root: %w", err)
	}
	for _, p := range points {
		full := filepath.Join(tmp, p.path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return "", fmt.Errorf("make blank root: %w", err)
		}
		if p.dir {
			err = os.MkdirAll(full, 0o755)
		} else {
			err = os.WriteFile(full, nil, 0o644)
		}
		if err != nil {
			return "", fmt.Errorf("make blank root: %w", err)
		}
	}
	if err := os.Rename(tmp, root); err != nil {
		if _, serr := os.Stat(root); serr == nil {
			return root, nil // another process made it first
		}
		return "", fmt.Errorf("make blank root: %w", err)
	}
	return root, nil
}

// SwitchRoot gives a container started on a blank root (Config.Blank, and
// Config.LowerDirs one directory made by MakeBlankRoot) the root filesystem it would
// have had if Create had been given lowers: an overlay of lowers and a new
// upper directory, mounted on the host as Create mounts one. Every mount the
// runtime made inside (proc, dev and their masks, sys, the /etc files, the
// bind mounts) moves into it, then the container's mount namespace pivots
// to it and drops the blank root. pivot_root moves the root and working
// directory of every process that had the old root, so the init carries on
// in the new root without knowing: it needs no privilege, and none is
// added to the container.
//
// It must run before the container runs anything but its init: a process
// that had chdir'd elsewhere in the blank root would keep that directory.
// The host side is a goroutine locked to a thread that enters the
// container's mount namespace (having stopped sharing its fs attributes,
// which setns needs) and ends with the goroutine, so no other goroutine
// ever runs there. Paths inside the image are resolved within its root
// (openat2 RESOLVE_IN_ROOT), as the runtime does: symlinks the image
// planted cannot point a mount outside it. On error the container is in
// an unknown state: delete it.
func (ct *Container) SwitchRoot(lowers []string) error {
	if len(lowers) == 0 {
		return errdefs.Errorf(errdefs.InvalidArgument, "container %s: no lower dirs (image layers)", ct.id)
	}
	if err := checkLowers(lowers); err != nil {
		return err
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	switch {
	case !ct.blank:
		return errdefs.Errorf(errdefs.InvalidArgument, "container %s was not made blank (Config.Blank)", ct.id)
	case ct.deleted:
		return errdefs.Errorf(errdefs.NotFound, "container %s: %w", ct.id, errDeleted)
	case ct.switched:
		return errdefs.Errorf(errdefs.InvalidArgument, "container %s already switched its root", ct.id)
	case ct.proc == nil:
		return errdefs.Errorf(errdefs.Unavailable, "container %s has no init to switch", ct.id)
	}
	if err := ct.switchRoot(lowers); err != nil {
		return fmt.Errorf("switch root of container %s: %w", ct.id, err)
	}
	ct.switched = true
	return nil
}

func (ct *Container) switchRoot(lowers []string) error {
	root := ct.path(rootDir)
	if err := mountOverlay(lowers, ct.rw(rootUpperDir), ct.rw(rootWorkDir), root); err != nil {
		return err
	}
	// Private first: a clone of a shared mount joins its peer group, and
	// the mounts moved under the clone would then show up here too.
	if err := unix.Mount("", root, "", unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make %s private: %w", root, err)
	}
	tree, err := unix.OpenTree(unix.AT_FDCWD, root, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("clone the new root: %w", err)
	}
	defer unix.Close(tree)
	carry, err := topMounts(ct.pid)
	if err != nil {
		return err
	}
	targets := make([]int, 0, len(carry))
	defer func() {
		for _, fd := range targets {
			unix.Close(fd)
		}
	}()
	// The container's root by fd, and each mount point resolved within it:
	// a path through /proc/<pid>/root would follow an absolute symlink
	// the container planted on the way to the host's own tree.
	cur, err := unix.Open(fmt.Sprintf("/proc/%d/root", ct.pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the container's root: %w", err)
	}
	defer unix.Close(cur)
	for _, m := range carry {
		isDir, err := isDirInRoot(cur, m)
		if err != nil {
			return fmt.Errorf("mount %s: %w", m, err)
		}
		fd, err := mountTarget(tree, m, isDir)
		if err != nil {
			return fmt.Errorf("mount point %s in the new root: %w", m, err)
		}
		targets = append(targets, fd)
	}
	ns, err := unix.Open(fmt.Sprintf("/proc/%d/ns/mnt", ct.pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open mount namespace: %w", err)
	}
	defer unix.Close(ns)
	// The namespace (and the root opened above) is the init's only if the
	// pid was not reused before the opens: the init still running proves
	// it.
	if ct.proc.exited() {
		return errdefs.Errorf(errdefs.Unavailable, "init %d exited", ct.pid)
	}
	return inMountNS(ns, func() error {
		if err := unix.MoveMount(tree, "", unix.AT_FDCWD, SwitchPoint, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("mount the new root: %w", err)
		}
		for i, m := range carry {
			if err := unix.MoveMount(unix.AT_FDCWD, m, targets[i], "", unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
				return fmt.Errorf("move mount %s: %w", m, err)
			}
		}
		if err := unix.Fchdir(tree); err != nil {
			return err
		}
		// As runc does: the old root ends up stacked on the new one, then
		// goes, as a slave so that its unmount reaches nothing else.
		if err := unix.PivotRoot(".", "."); err != nil {
			return fmt.Errorf("pivot_root: %w", err)
		}
		if err := unix.Mount("", ".", "", unix.MS_SLAVE|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("make the old root a slave: %w", err)
		}
		if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount the old root: %w", err)
		}
		return nil
	})
}

// inMountNS runs f on a thread of its own in the mount namespace ns. The
// thread is never handed back to the scheduler: it exits with its
// goroutine (a locked goroutine's thread does, but for the main thread).
func inMountNS(ns int, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// The main thread is never ended, only parked for good, and
			// /proc/self shows its namespace: hold it while another does.
			err := inMountNS(ns, f)
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		// setns(CLONE_NEWNS) refuses a thread sharing root and cwd with
		// others, as every Go thread does.
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			errc <- fmt.Errorf("unshare fs attributes: %w", err)
			return
		}
		if err := unix.Setns(ns, unix.CLONE_NEWNS); err != nil {
			errc <- fmt.Errorf("enter mount namespace: %w", err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// topMounts returns the mount points of the mounts right on pid's root
// mount (proc, dev, sys, the /etc files, bind mounts), in mount order.
// Those nested in them (dev/pts, the masks on proc) move with them.
func topMounts(pid int) ([]string, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		return nil, fmt.Errorf("read mounts of init %d: %w", pid, err)
	}
	defer f.Close()
	type entry struct{ id, parent, point string }
	var all []entry
	rootID := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 5 {
			continue
		}
		e := entry{fs[0], fs[1], unescapeMountinfo(fs[4])}
		if e.point == "/" {
			rootID = e.id // the last one mounted on / is the root
		}
		all = append(all, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mounts of init %d: %w", pid, err)
	}
	if rootID == "" {
		return nil, fmt.Errorf("init %d has no root mount", pid)
	}
	var out []string
	for _, e := range all {
		if e.parent == rootID && e.point != "/" && e.point != SwitchPoint {
			out = append(out, e.point)
		}
	}
	return out, nil
}

// mountTarget returns an O_PATH fd of p inside the tree whose root is the
// fd root, made (a directory, or an empty file when dir is false) with its
// missing parents when absent. p resolves within root, as if root were /;
// a dangling symlink on the way is followed and its target made, as the
// runtime's securejoin does.
func mountTarget(root int, p string, dir bool) (int, error) {
	rel := inRoot(p)
	for range maxHops {
		if rel == "" {
			return -1, errors.New("not a mount point below /")
		}
		fd, err := openInRoot(root, rel, 0)
		if !errors.Is(err, unix.ENOENT) {
			return fd, err
		}
		parent, err := mkdirAllInRoot(root, path.Dir(rel))
		if err != nil {
			return -1, err
		}
		name := path.Base(rel)
		if dir {
			err = unix.Mkdirat(parent, name, 0o755)
		} else {
			var f int
			if f, err = unix.Openat(parent, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644); err == nil {
				unix.Close(f)
			}
		}
		if err == nil {
			fd, err = unix.Openat(parent, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			unix.Close(parent)
			return fd, err
		}
		link, lerr := readlinkat(parent, name)
		unix.Close(parent)
		if !errors.Is(err, unix.EEXIST) || lerr != nil {
			return -1, err
		}
		if path.IsAbs(link) {
			rel = inRoot(link)
		} else {
			rel = inRoot(path.Join(path.Dir(rel), link))
		}
	}
	return -1, unix.ELOOP
}

// isDirInRoot reports whether p, resolved within the tree whose root is
// the fd root and not followed if it is a symlink itself, is a directory
// (a mount point's mounted root, as the walk crosses into it).
func isDirInRoot(root int, p string) (bool, error) {
	rel := inRoot(p)
	if rel == "" {
		rel = "."
	}
	fd, err := openInRoot(root, rel, unix.O_NOFOLLOW)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, err
	}
	return st.Mode&unix.S_IFMT == unix.S_IFDIR, nil
}

// maxHops bounds the symlinks mountTarget follows, as the kernel's 40.
const maxHops = 40

// inRoot is p made relative to a root it cannot climb out of ("" for /).
func inRoot(p string) string { return strings.TrimPrefix(path.Clean("/"+p), "/") }

func readlinkat(dir int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dir, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// mkdirAllInRoot makes rel and its parents inside root, each resolved
// within it, and returns an O_PATH fd of rel.
func mkdirAllInRoot(root int, rel string) (int, error) {
	if rel == "." || rel == "" {
		return openInRoot(root, ".", unix.O_DIRECTORY)
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		prefix := strings.Join(parts[:i+1], "/")
		fd, err := openInRoot(root, prefix, unix.O_DIRECTORY)
		if err == nil {
			if i == len(parts)-1 {
				return fd, nil
			}
			unix.Close(fd)
			continue
		}
		if !errors.Is(err, unix.ENOENT) {
			return -1, err
		}
		parent, err := openInRoot(root, strings.Join(append([]string{"."}, parts[:i]...), "/"), unix.O_DIRECTORY)
		if err != nil {
			return -1, err
		}
		err = unix.Mkdirat(parent, parts[i], 0o755)
		unix.Close(parent)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, err
		}
		if i == len(parts)-1 {
			return openInRoot(root, prefix, unix.O_DIRECTORY)
		}
	}
	return -1, errors.New("unreachable")
}

func openInRoot(root int, rel string, flags uint64) (int, error) {
	return unix.Openat2(root, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC | flags,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
}
