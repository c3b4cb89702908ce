package pid1

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/httpserve"
	"github.com/berth-sh/berth/internal/reap"
)

// Options configure Run.
type Options struct {
	// Listener is where Handler is served, e.g. from ListenerFromFD. When nil,
	// Run listens on Socket.
	Listener net.Listener
	// Socket is the path of the unix socket to create when Listener is nil.
	// A stale socket file there is removed first.
	Socket string
	// Handler serves every path but ControlPath.
	Handler http.Handler
	// Deadline is when Run returns ErrDeadline; zero means never. It can be
	// moved with SetDeadline.
	Deadline time.Time
	// Token, when set, must come with every call on ControlPath.
	Token string
	// Reap turns zombie reaping on even when not PID 1 (then the process
	// should be a child subreaper). PID 1 always reaps.
	Reap bool
	// Logf logs the agent's own events; nil means the standard logger.
	Logf func(format string, args ...any)
}

// ErrDeadline is returned by Run when the deadline passed.
var ErrDeadline = errors.New("agent deadline reached")

// shutdownGrace is how long requests in flight may take after a stop.
const shutdownGrace = 2 * time.Second

// Run serves o.Handler until ctx is done (nil), SIGTERM or SIGINT arrives
// (nil; not as PID 1, which no signal but SIGKILL ends), the deadline
// passes (ErrDeadline) or serving fails.
func Run(ctx context.Context, o Options) error {
	if o.Handler == nil {
		return errors.New("agent: no handler")
	}
	logf := o.Logf
	if logf == nil {
		logf = log.Printf
	}
	if os.Getpid() == 1 {
		if err := Harden(); err != nil {
			return err
		}
	}
	if err := closeOnExec(); err != nil {
		logf("agent: mark inherited fds close-on-exec: %v", err)
	}
	ln := o.Listener
	if ln == nil {
		var err error
		if ln, err = listenUnix(o.Socket); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	if os.Getpid() == 1 || o.Reap {
		if reap.PidfdsWork() {
			wg.Add(1)
			go func() { defer wg.Done(); reap.Loop(ctx) }()
		} else {
			logf("agent: pidfds unavailable: not reaping orphans (reaping could steal exit statuses)")
		}
	}

	// Catch the signals before serving. As PID 1 none of them stops the
	// agent: the sandbox's own processes can send them (see
	// dropFatalSignals); the host ends a sandbox with SIGKILL or the
	// deadline. Elsewhere, once the socket answers, SIGTERM or SIGINT is a
	// clean stop, never the default death.
	sigs := make(chan os.Signal, 1)
	if os.Getpid() == 1 {
		defer dropFatalSignals()()
	} else {
		signal.Notify(sigs, unix.SIGTERM, unix.SIGINT)
		defer signal.Stop(sigs)
	}

	dl := newDeadline(o.Deadline, o.Token)
	defer dl.stop()
	mux := http.NewServeMux()
	mux.Handle(ControlPath, dl)
	mux.Handle("/", o.Handler)
	srv := httpserve.NewServer(mux, 0)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(httpserve.Listener(ln)) }()

	var result error
	select {
	case err := <-serveErr:
		return fmt.Errorf("agent: serve: %w", err)
	case <-ctx.Done():
	case s := <-sigs:
		logf("agent: %v: stopping", s)
	case <-dl.expired():
		logf("agent: deadline %s reached: stopping", dl.get().Format(time.RFC3339))
		result = ErrDeadline
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	return result
}

// listenUnix listens on path, replacing a stale socket file (but nothing
// else) left by an earlier run.
func listenUnix(path string) (net.Listener, error) {
	if path == "" {
		return nil, errors.New("agent: no listener and no socket path")
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return ln, nil
}

// ListenerFromFD wraps an inherited listening socket, e.g. fd 3 passed by
// the runtime (container.Config.ExtraFiles). The fd itself is closed; the
// listener holds a duplicate.
func ListenerFromFD(fd int) (net.Listener, error) {
	f := os.NewFile(uintptr(fd), "listener")
	if f == nil {
		return nil, fmt.Errorf("agent: fd %d is not open", fd)
	}
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("agent: fd %d: %w", fd, err)
	}
	return ln, nil
}
