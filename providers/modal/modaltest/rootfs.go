package modaltest

import "github.com/berth-sh/berth/internal/testing/fakeengine"

// Busybox finds a static busybox for Options.Busybox, or says why chroot
// mode cannot run here (it needs root or unprivileged user namespaces).
func Busybox() (string, error) { return fakeengine.Busybox() }
