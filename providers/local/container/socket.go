package container

import (
	"fmt"
	"net"
	"os"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// maxSocketPath is the room in sockaddr_un for a path and its NUL.
const maxSocketPath = 107

// ListenUnix creates a listening unix socket at path on the host and
// returns it as a file to pass in Config.ExtraFiles: the agent inside
// serves on it (pid1.ListenerFromFD) while the path stays on the host, out
// of the container's reach. The container cannot plant a symlink in its
// place or connect to it itself, which a bind-mounted, writable socket
// directory would allow. The socket file is not removed when the returned
// file is closed; it goes with the directory it is in.
func ListenUnix(path string) (*os.File, error) {
	if len(path) > maxSocketPath {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "socket path %q is %d bytes, over the %d a unix socket allows", path, len(path), maxSocketPath)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false)
	f, err := ln.File()
	ln.Close()
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return f, nil
}
