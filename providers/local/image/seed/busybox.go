package seed

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// BusyboxPaths are where Debian's busybox-static installs the binary.
var BusyboxPaths = []string{"/bin/busybox", "/usr/bin/busybox"}

// Epoch is the modification time of every entry, so that two builds from
// one busybox binary are the same bytes (and the same layer digest).
var Epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// FindBusybox returns the host's static busybox. A missing or dynamically
// linked one is NotSupported, with the package that provides a static one.
func FindBusybox() (string, error) {
	var dynamic string
	for _, p := range BusyboxPaths {
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		static, err := IsStatic(p)
		if err != nil {
			return "", fmt.Errorf("seed: %s: %w", p, err)
		}
		if static {
			return p, nil
		}
		dynamic = p
	}
	if dynamic != "" {
		return "", errdefs.Errorf(errdefs.NotSupported, "%s is dynamically linked and cannot run in an empty image; install a static one: apt-get install busybox-static", dynamic)
	}
	return "", errdefs.Errorf(errdefs.NotSupported, "no busybox on this host (looked in %s); install it: apt-get install busybox-static", strings.Join(BusyboxPaths, ", "))
}

// IsStatic reports whether the ELF executable at p needs no program
// interpreter (no PT_INTERP), so it runs in an image without a libc.
func IsStatic(p string) (bool, error) {
	f, err := elf.Open(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

// Busybox files other than the binary and its applets: enough of a system
// for a shell, file tools and user lookups (root and nobody).
var busyboxFiles = []struct {
	name string
	mode int64
	body string
}{
	{"bin/", 0o755, ""}, {"dev/", 0o755, ""}, {"etc/", 0o755, ""}, {"home/", 0o755, ""},
	{"proc/", 0o755, ""}, {"root/", 0o700, ""}, {"sys/", 0o755, ""},
	{"tmp/", 0o1777, ""}, {"usr/", 0o755, ""}, {"usr/bin/", 0o755, ""}, {"var/", 0o755, ""},
	{"etc/passwd", 0o644, "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"},
	{"etc/group", 0o644, "root:x:0:\nnogroup:x:65534:\n"},
	{"etc/hostname", 0o644, "busybox\n"},
}

// BusyboxTar writes a plain rootfs tar to w: the static busybox at bin as
// /bin/busybox, a symlink in /bin for each of its applets, /etc/passwd and
// /etc/group with root and nobody, /tmp, and the host's bash (with its
// loader and libraries) as /bin/bash when the host has one. bin "" means
// FindBusybox.
func BusyboxTar(w io.Writer, bin string) error { return busyboxTar(w, bin, true) }

// BareBusyboxTar is BusyboxTar without bash: an image with no libc at all,
// for tests that must show something runs without one.
func BareBusyboxTar(w io.Writer, bin string) error { return busyboxTar(w, bin, false) }

func busyboxTar(w io.Writer, bin string, withBash bool) error {
	if bin == "" {
		var err error
		if bin, err = FindBusybox(); err != nil {
			return err
		}
	} else if static, err := IsStatic(bin); err != nil {
		return fmt.Errorf("seed: %s: %w", bin, err)
	} else if !static {
		return errdefs.Errorf(errdefs.NotSupported, "%s is dynamically linked and cannot run in an empty image; install a static one: apt-get install busybox-static", bin)
	}
	body, err := os.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "--list")
	cmd.Stderr = &stderr
	list, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("seed: %s --list: %w: %s", bin, err, bytes.TrimSpace(stderr.Bytes()))
	}
	tw := tar.NewWriter(w)
	put := func(h *tar.Header, data []byte) error {
		h.ModTime, h.Format = Epoch, tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
		return nil
	}
	for _, f := range busyboxFiles {
		h := &tar.Header{Name: f.name, Mode: f.mode, Typeflag: tar.TypeReg, Size: int64(len(f.body))}
		if strings.HasSuffix(f.name, "/") {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := put(h, []byte(f.body)); err != nil {
			return err
		}
	}
	if err := put(&tar.Header{Name: "bin/busybox", Mode: 0o755, Typeflag: tar.TypeReg, Size: int64(len(body))}, body); err != nil {
		return err
	}
	for _, applet := range strings.Fields(string(list)) {
		if applet == "busybox" || strings.Contains(applet, "/") {
			continue
		}
		if err := put(&tar.Header{Name: "bin/" + applet, Mode: 0o777, Typeflag: tar.TypeSymlink, Linkname: "busybox"}, nil); err != nil {
			return err
		}
	}
	// The host's bash and its libraries, so that /bin/bash -l -c (how the
	// E2B SDKs run every command) works in the seeded image.
	var bash []hostFile
	if withBash {
		if bash, err = bashFiles(); err != nil {
			return err
		}
	}
	var names []string
	for _, f := range bash {
		names = append(names, f.Name)
	}
	have := map[string]bool{"bin": true, "usr": true, "usr/bin": true}
	for _, d := range parentDirs(names) {
		if !have[d] {
			if err := put(&tar.Header{Name: d + "/", Mode: 0o755, Typeflag: tar.TypeDir}, nil); err != nil {
				return err
			}
		}
	}
	for _, f := range bash {
		b, err := os.ReadFile(f.Source)
		if err != nil {
			return fmt.Errorf("seed: %w", err)
		}
		if err := put(&tar.Header{Name: f.Name, Mode: 0o755, Typeflag: tar.TypeReg, Size: int64(len(b))}, b); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	return nil
}
