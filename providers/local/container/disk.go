package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Names inside Config.Dir of a container with a disk limit
// (Config.DiskBytes): the file system's image and where it is mounted;
// the overlays' upper and work directories live in the mount.
const (
	diskImage = "disk.img"
	diskDir   = "disk"
)

// MinDiskBytes is the smallest disk limit: below it ext4's own metadata
// leaves a sandbox next to nothing.
const MinDiskBytes = 16 << 20

// mkfsArgs make the file system of a disk limit. No journal: the file
// system lives exactly as long as its sandbox and is thrown away after a
// crash, so a journal would only take space and writes. No reserved
// blocks: the sandbox gets the whole size. lazy_itable_init leaves the
// inode tables unwritten (sparse) and nodiscard skips trimming a file that
// is all holes; the mount's noinit_itable keeps the kernel from zeroing
// those tables later, which would fill the image's holes on the host.
var mkfsArgs = []string{"-q", "-F", "-m", "0", "-O", "^has_journal", "-E", "lazy_itable_init=1,nodiscard"}

// mkfsBinary formats a disk; a variable so that a test can make it missing.
var mkfsBinary = "mkfs.ext4"

func lookMkfs() (string, error) {
	p, err := exec.LookPath(mkfsBinary)
	if err != nil {
		return "", errdefs.Errorf(errdefs.NotSupported, "a disk limit needs mkfs.ext4 (%w); install it with: apt-get install e2fsprogs", err)
	}
	return p, nil
}

// DiskSupported says whether this host can make disk limits
// (Config.DiskBytes): it has mkfs.ext4 and loop devices. The error says
// what is missing and how to install it.
func DiskSupported() error {
	if _, err := lookMkfs(); err != nil {
		return err
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return errdefs.Errorf(errdefs.NotSupported, "a disk limit needs loop devices (%w); load the loop module (modprobe loop) or run where /dev/loop-control exists", err)
	}
	return nil
}

// makeDisk makes a sparse file of size bytes at img, formats it ext4 and
// mounts it on dir (which it makes) through a loop device, nosuid, nodev
// and noatime. The loop device clears itself when the file system is
// unmounted (LO_FLAGS_AUTOCLEAR), and when this process dies before the
// mount: nothing but the mount is left to undo.
func makeDisk(ctx context.Context, img, dir string, size int64) error {
	mkfs, err := lookMkfs()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(img, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("disk image: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("disk image: %w", err)
	}
	if out, err := exec.CommandContext(ctx, mkfs, append(mkfsArgs, img)...).CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.ext4 %s: %w: %s", img, err, tail(out))
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("disk mount point: %w", err)
	}
	loop, err := attachLoop(f)
	if err != nil {
		return err
	}
	defer loop.Close() // the mount holds the device from here on
	if err := unix.Mount(loop.Name(), dir, "ext4", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOATIME, "noinit_itable"); err != nil {
		return fmt.Errorf("mount disk image on %s: %w", dir, err)
	}
	return nil
}

// attachLoop binds a free loop device to f and returns it open. A device
// another process took between the two calls (EBUSY) is retried.
func attachLoop(f *os.File) (*os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, errdefs.Errorf(errdefs.NotSupported, "a disk limit needs loop devices (%w); load the loop module (modprobe loop) or run where /dev/loop-control exists", err)
	}
	defer ctl.Close()
	cfg := unix.LoopConfig{Fd: uint32(f.Fd()), Info: unix.LoopInfo64{Flags: unix.LO_FLAGS_AUTOCLEAR}}
	for try := 0; ; try++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, errdefs.Errorf(errdefs.ResourceExhausted, "no free loop device for a disk limit: %w", err)
		}
		dev, err := os.OpenFile("/dev/loop"+strconv.Itoa(n), os.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, errdefs.Errorf(errdefs.NotSupported, "a disk limit needs loop devices: %w", err)
		}
		err = unix.IoctlLoopConfigure(int(dev.Fd()), &cfg)
		if err == nil {
			return dev, nil
		}
		dev.Close()
		if !errors.Is(err, unix.EBUSY) || try >= 16 {
			return nil, fmt.Errorf("attach loop device %d: %w", n, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// LoopDevicesOf returns the loop devices (/dev/loopN) whose backing file
// lies under dir, for tests that check teardown released them.
func LoopDevicesOf(dir string) []string {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // detached meanwhile
		}
		if rel, err := filepath.Rel(dir, string(trimNL(b))); err == nil && filepath.IsLocal(rel) {
			out = append(out, "/dev/"+filepath.Base(filepath.Dir(filepath.Dir(f))))
		}
	}
	return out
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == 0) {
		b = b[:len(b)-1]
	}
	return b
}

// unmountAll takes off what Create and SwitchRoot mount in the container
// directory dir, top first: SwitchRoot's overlay, Create's, then the disk
// under both, whose loop device clears itself with the unmount.
func unmountAll(dir string) error {
	return errors.Join(
		Unmount(filepath.Join(dir, rootDir)),
		Unmount(filepath.Join(dir, rootfsDir)),
		Unmount(filepath.Join(dir, diskDir)),
	)
}

// RemoveDir removes a container directory that has no container state
// (its creator died inside Create, before the state was saved): what
// Create mounted there, then the directory. Run the runtime's delete
// first if the runtime started the container.
func RemoveDir(dir string) error {
	if err := unmountAll(dir); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}
