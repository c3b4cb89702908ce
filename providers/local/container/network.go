package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// slirpReadyTimeout bounds how long slirp4netns may take to configure the
// interface (it takes a few ms).
const slirpReadyTimeout = 10 * time.Second

// slirpDNS is the resolver slirp4netns answers on inside the container.
const slirpDNS = "10.0.2.3"

func lookSlirp(bin string) (string, error) {
	if bin == "" {
		bin = "slirp4netns"
	}
	p, err := exec.LookPath(bin)
	if err != nil {
		return "", errdefs.Errorf(errdefs.NotSupported, "network public needs slirp4netns (%w); install it with: apt-get install slirp4netns", err)
	}
	return p, nil
}

// slirp is a slirp4netns process giving one container's network namespace a
// tap0 interface with outbound access and no access to the host's loopback.
type slirp struct {
	cmd  *exec.Cmd
	done chan error
}

// startSlirp attaches slirp4netns to the network namespace of pid, once
// the egress filter is in it (see egress.go). exitR is the read end of a
// pipe whose write end only the container holds: when the container is
// gone, the pipe closes and slirp4netns exits by itself, even if this
// process died long before.
func startSlirp(ctx context.Context, bin string, pid int, exitR *os.File, log *os.File) (*slirp, error) {
	if err := filterEgress(pid); err != nil {
		return nil, err
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("slirp4netns: %w", err)
	}
	defer readyR.Close()
	cmd := exec.Command(bin,
		"--configure", "--mtu=65520", "--disable-host-loopback",
		"--enable-sandbox", "--enable-seccomp",
		"--ready-fd=3", "--exit-fd=4",
		strconv.Itoa(pid), "tap0")
	cmd.ExtraFiles = []*os.File{readyW, exitR}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		readyW.Close()
		return nil, fmt.Errorf("start slirp4netns: %w", err)
	}
	readyW.Close()
	s := &slirp{cmd: cmd, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()

	// slirp4netns writes "1" to the ready fd once tap0 is configured.
	readyErr := make(chan error, 1)
	go func() {
		buf := make([]byte, 1)
		_, err := readyR.Read(buf)
		readyErr <- err
	}()
	t := time.NewTimer(slirpReadyTimeout)
	defer t.Stop()
	select {
	case err = <-readyErr:
		if err == nil {
			return s, nil
		}
		err = fmt.Errorf("slirp4netns exited before the network was up (see %s): %w", log.Name(), err)
	case err = <-s.done:
		s.done <- err
		err = fmt.Errorf("slirp4netns exited before the network was up (see %s): %v", log.Name(), err)
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = errdefs.Errorf(errdefs.Unavailable, "slirp4netns not ready after %v", slirpReadyTimeout)
	}
	s.stop()
	return nil, err
}

// stop kills slirp4netns and reaps it. It is a no-op once it has exited.
func (s *slirp) stop() error {
	if s == nil {
		return nil
	}
	_ = s.cmd.Process.Kill()
	err := <-s.done
	s.done <- err // later stops see the same result
	var ee *exec.ExitError
	if err == nil || errors.As(err, &ee) {
		return nil // killed or exited: either way it is gone
	}
	return fmt.Errorf("slirp4netns: %w", err)
}
