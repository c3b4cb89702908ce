package container

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// maxMountData is the size of the page the kernel copies mount(2) options
// into; longer option strings are cut and the mount fails.
const maxMountData = 4095

// overlayOptions returns the mount options of an overlay whose lowerdir
// lists lower dirs top first, the reverse of the lowest-first order of
// Config.LowerDirs.
func overlayOptions(lowers []string, upper, work string) string {
	top := make([]string, len(lowers))
	for i, d := range lowers {
		top[len(lowers)-1-i] = d
	}
	return "lowerdir=" + strings.Join(top, ":") + ",upperdir=" + upper + ",workdir=" + work
}

// mountOverlay mounts the overlay of lowers (lowest first) and upper on
// target, nosuid and nodev: the host side of a sandbox's root holds what
// the sandbox wrote (a set-id binary, a device node in an image), and no
// host process may run or open it with those powers. Bind mounts of it,
// the container's root among them, keep the flags; inside, no_new_privs
// already makes set-id bits inert and /dev is the runtime's own. Option
// strings too long for mount(2) go through the new mount API one layer at
// a time (lowerdir+, Linux 6.8+).
func mountOverlay(lowers []string, upper, work, target string) error {
	opts := overlayOptions(lowers, upper, work)
	if len(opts) <= maxMountData {
		if err := unix.Mount("overlay", target, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("mount overlay on %s: %w", target, err)
		}
		return nil
	}
	return mountOverlayFSConfig(lowers, upper, work, target)
}

func mountOverlayFSConfig(lowers []string, upper, work, target string) error {
	fsfd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("mount overlay on %s: fsopen: %w", target, err)
	}
	defer unix.Close(fsfd)
	// lowerdir+ appends below the layers already given: top first.
	for i := len(lowers) - 1; i >= 0; i-- {
		if err := unix.FsconfigSetString(fsfd, "lowerdir+", lowers[i]); err != nil {
			return errdefs.Errorf(errdefs.NotSupported, "mount overlay of %d layers: option string over %d bytes and lowerdir+ refused (needs Linux 6.8+): %w", len(lowers), maxMountData, err)
		}
	}
	if err := unix.FsconfigSetString(fsfd, "upperdir", upper); err != nil {
		return fmt.Errorf("mount overlay: upperdir: %w", err)
	}
	if err := unix.FsconfigSetString(fsfd, "workdir", work); err != nil {
		return fmt.Errorf("mount overlay: workdir: %w", err)
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return fmt.Errorf("mount overlay: create: %w", err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fmt.Errorf("mount overlay: fsmount: %w", err)
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount overlay on %s: move_mount: %w", target, err)
	}
	return nil
}

// Unmount detaches whatever is mounted on target, stacked mounts
// included; nothing mounted is success, so teardown can run twice.
func Unmount(target string) error {
	for {
		err := unix.Unmount(target, unix.UMOUNT_NOFOLLOW)
		switch {
		case err == nil:
			continue // stacked mounts: take them all off
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			return nil // not a mount point (any more)
		case errors.Is(err, unix.EBUSY):
			// A process still holds it (should not happen once the
			// container is dead): detach lazily rather than leak it.
			if err := unix.Unmount(target, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil {
				return fmt.Errorf("unmount %s: %w", target, err)
			}
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		default:
			return fmt.Errorf("unmount %s: %w", target, err)
		}
	}
}

// unescapeMountinfo undoes the octal escapes (\040 for space, ...) the
// kernel uses in mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range s[i+1 : i+4] {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + byte(c-'0')
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
