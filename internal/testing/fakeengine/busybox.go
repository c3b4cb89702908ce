package fakeengine

import (
	"errors"
	"fmt"
	"os/exec"
	"sync"

	"github.com/berth-sh/berth/internal/hostproc"
	"github.com/berth-sh/berth/providers/local/image/seed"
)

var busybox = sync.OnceValues(func() (string, error) {
	const install = "apt-get install busybox-static"
	p, err := exec.LookPath("busybox")
	if err != nil {
		return "", errors.New("the fakes' confined sandboxes need a static busybox (" + install + ")")
	}
	static, err := seed.IsStatic(p)
	switch {
	case err != nil:
		return "", fmt.Errorf("busybox %s: %w", p, err)
	case !static:
		return "", fmt.Errorf("the fakes' confined sandboxes need a static busybox (%s); %s is dynamic", install, p)
	}
	if why := hostproc.ConfineMissing(p); why != "" {
		return "", errors.New(why)
	}
	return p, nil
})

// Busybox returns the static busybox that Layout.Busybox needs, or says
// why there is none or why it cannot confine commands here (that needs
// root or unprivileged user namespaces). Tests skip with the reason.
func Busybox() (string, error) { return busybox() }
