package localtest

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/berth-sh/berth/providers/local/image/seed"
)

// BashScript stands in for bash in a busybox root: the E2B SDKs run every
// command as /bin/bash -l -c, and busybox has no bash.
const BashScript = "#!/bin/sh\nexec /bin/sh \"$@\"\n"

// WriteBashRootfs writes a rootfs tar to file: the seeded busybox rootfs
// with BashScript as /bin/bash, the "base" template of the tests that run
// the E2B SDKs over local sandboxes (serve's, and the k8s provider's
// through its node shim).
func WriteBashRootfs(file string) error {
	var rootfs bytes.Buffer
	if err := seed.BusyboxTar(&rootfs, ""); err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	tr := tar.NewReader(&rootfs)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			f.Close()
			return err
		}
		if h.Name == "bin/bash" {
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			f.Close()
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			f.Close()
			return err
		}
	}
	err = tw.WriteHeader(&tar.Header{Name: "bin/bash", Mode: 0o755, Typeflag: tar.TypeReg, Size: int64(len(BashScript)), ModTime: seed.Epoch})
	if err == nil {
		_, err = io.WriteString(tw, BashScript)
	}
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("bash image: %w", err)
	}
	return nil
}
