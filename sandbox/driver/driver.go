// Package driver defines what a sandbox provider implements, and the values
// a provider and its callers exchange: Spec (what a sandbox is asked to be),
// Command, Info, FileInfo, ports and endpoints, and Capabilities. Import it
// from provider packages, from the packages below them that speak those
// values (envd, the local provider's machinery), and from package sandbox,
// which wraps these interfaces in the concrete types callers use and
// re-exports the values under its own names.
//
// Every method comment is a contract that the conformance suite in
// sandbox/sandboxtest checks. Errors carry a class from package
// sandbox/errdefs (errdefs.Errorf, errdefs.Classify); the wrappers add the
// operation, provider name and sandbox ID, so drivers need not.
//
// Optional features are small interfaces found by type assertion
// (TimeoutSetter, Signaler, TreeUploader, Endpointer, ...). A driver states only the
// facts no interface can show (resource mode, networks, GPUs, ...); the
// capabilities that follow from an interface are derived from it by
// Derive, so that no driver, registry entry or test can claim a feature
// whose call is not there. The wrappers in package sandbox answer
// NotSupported for a feature a handle lacks.
package driver

import (
	"context"
	"io"
	"net"
	"time"
)

// Provider creates and finds sandboxes of one backend.
type Provider interface {
	// Create makes a sandbox from a validated Spec with defaults filled in
	// (TTL > 0, Network.Mode set). On error nothing may be left running: a
	// driver that fails half way cleans up what it made before returning.
	Create(ctx context.Context, spec Spec) (Sandbox, error)
	// Connect returns a handle to an existing sandbox from its ID alone, from
	// any process. An unknown or deleted ID is NotFound.
	Connect(ctx context.Context, id string) (Sandbox, error)
	// List returns the live sandboxes that carry every given label (all of
	// them when labels is empty).
	List(ctx context.Context, labels map[string]string) ([]Info, error)
	// Delete destroys the sandbox with this ID. An unknown ID is NotFound.
	Delete(ctx context.Context, id string) error
	// Capabilities reports what the provider supports; it must not block.
	// Drivers return Derive over their handle types, so that the fields
	// that follow from optional interfaces say what the handles do.
	Capabilities() Capabilities
	// Close releases the provider's resources (connections, goroutines). It
	// does not delete sandboxes.
	Close() error
}

// Sandbox is a handle to one sandbox.
type Sandbox interface {
	// ID is the provider's identifier, usable with Provider.Connect.
	ID() string
	// Exec starts a command and returns once it has started (or failed to).
	// The returned Process delivers output to cmd.Stdout and cmd.Stderr as it
	// arrives, reads cmd.Stdin to EOF and then closes the process's stdin.
	// A missing program is not an error of Exec: the process exits 127.
	Exec(ctx context.Context, cmd Command) (Process, error)
	// WriteFile creates or truncates the file at the absolute path, creating
	// parent directories, with the given permission bits.
	WriteFile(ctx context.Context, path string, r io.Reader, mode uint32) error
	// ReadFile opens the file at the absolute path. A missing file is
	// NotFound; a directory is InvalidArgument.
	ReadFile(ctx context.Context, path string) (io.ReadCloser, error)
	// Stat describes one path without following a final symlink. Missing is
	// NotFound.
	Stat(ctx context.Context, path string) (FileInfo, error)
	// ListDir lists a directory's entries (not recursive), sorted by name.
	ListDir(ctx context.Context, path string) ([]FileInfo, error)
	// MakeDir creates a directory and its parents; an existing directory is
	// AlreadyExists.
	MakeDir(ctx context.Context, path string) error
	// Remove deletes a file or a directory tree. Missing is NotFound.
	Remove(ctx context.Context, path string) error
	// Delete destroys the sandbox. A second Delete is NotFound.
	Delete(ctx context.Context) error
	// Close releases the handle (connections, keep-alive loops) and does not
	// destroy the sandbox. It is called at most once by the wrapper.
	Close() error
}

// Process is a started command.
type Process interface {
	// PID identifies the process inside the sandbox.
	PID() int
	// Wait blocks until the process has ended and its output has been
	// delivered, and returns its exit code (128+n when killed by signal n). A
	// non-zero exit is not an error. When the command's Timeout passes the
	// process is killed and Wait returns a DeadlineExceeded error. When ctx
	// ends first Wait returns ctx's error and leaves the process running.
	Wait(ctx context.Context) (int, error)
}

// TimeoutSetter is implemented by sandboxes whose provider-side deadline
// can be moved after create (Capabilities.SetTimeout).
type TimeoutSetter interface {
	// SetTimeout moves the sandbox's deadline to now + d on the provider
	// side (d > 0; a provider with a coarser clock rounds d up to its
	// Capabilities.MinTimeout).
	SetTimeout(ctx context.Context, d time.Duration) error
}

// Signaler is implemented by processes that can be signalled
// (Capabilities.Signal).
type Signaler interface {
	// Signal sends a signal to the process. A process that has ended is
	// NotFound.
	Signal(ctx context.Context, sig Signal) error
}

// Pauser is implemented by sandboxes that can be paused and resumed with
// their memory kept (Capabilities.Pause).
type Pauser interface {
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
}

// Snapshotter is implemented by sandboxes whose file system can be saved
// as an image that later Specs name (Capabilities.Snapshot).
type Snapshotter interface {
	// Snapshot saves the file system and returns the image reference.
	Snapshot(ctx context.Context) (image string, err error)
}

// Forker is implemented by sandboxes that can be copied, while they run,
// into a new sandbox (Capabilities.Fork).
type Forker interface {
	// Fork makes a new sandbox holding a copy of this one's file system
	// (and, where the provider can, its memory) and returns a handle to it
	// once it runs. The caller owns the new sandbox: Delete destroys it.
	Fork(ctx context.Context) (Sandbox, error)
}

// TreeUploader is implemented by drivers that unpack a tar stream in one call.
// UploadTar unpacks into the absolute directory dir, creating it. The wrapper
// hands it a re-written stream whose entry names are relative, have no ".."
// element and pass through no symlink of the same archive; a driver still
// keeps writes under dir on its own (hosttar.Extract does both).
type TreeUploader interface {
	UploadTar(ctx context.Context, dir string, tarStream io.Reader) error
}

// TreeDownloader is implemented by drivers that produce a tar of a tree in
// one call. Entry names are relative to path (a single file is its base
// name); symlinks are stored, not followed. A missing path is NotFound from
// DownloadTar itself, before any byte is read. Closing the stream early
// stops the work behind it.
type TreeDownloader interface {
	DownloadTar(ctx context.Context, path string) (io.ReadCloser, error)
}

// ImagePreparer is implemented by drivers that can fetch or build a Spec's
// image ahead of Create (pull and unpack layers, resolve a template), so
// that runners can time image resolution apart from sandbox creation and
// many creates of one image share the work.
type ImagePreparer interface {
	PrepareImage(ctx context.Context, spec Spec) error
}

// Reaper is implemented by drivers that keep local state which can outlive
// its sandbox (a dead runtime's mounts and directories): Reap removes every
// expired or dead sandbox and returns their IDs.
type Reaper interface {
	Reap(ctx context.Context) ([]string, error)
}

// EnvdServer is implemented by drivers whose sandboxes answer E2B's envd
// protocol themselves (the local provider's in-sandbox agent), so that a
// server speaking that protocol to clients (`berth serve`) can forward
// calls as they are instead of translating them to Exec and file calls.
// The endpoint stays valid while the handle is open.
type EnvdServer interface {
	EnvdEndpoint(ctx context.Context) (EnvdEndpoint, error)
}

// Endpointer is implemented by sandboxes whose ports a client on the
// launcher's side can reach (Capabilities.Ports lists the protocols).
type Endpointer interface {
	// Endpoint returns how to reach port (its Protocol filled in) inside
	// the sandbox: a URL, the headers to send and an expiry. It does not
	// wait for a server to listen there: a server may start later. Once
	// one listens, HTTP requests (WebSocket upgrades and long streams
	// included) or, for PortTCP, raw bytes reach it intact; while none
	// does, an HTTP request is answered at once with a 5xx status whose
	// body says so, and a TCP connection is closed, never left hanging.
	// A protocol the provider cannot carry is NotSupported; with
	// Capabilities.PortsAtCreate, a port the Spec did not declare, or
	// declared with another protocol, is InvalidArgument. Keep-alives
	// the provider needs while an endpoint is in use (traffic that does
	// not count as activity) run until Close.
	Endpoint(ctx context.Context, port Port) (Endpoint, error)
}

// PortDialer is implemented by sandboxes that carry a connection to one
// of their ports over the provider's own channel (Capabilities.DialPort),
// so that a proxy (`berth serve`) needs no listener of its own.
type PortDialer interface {
	// DialPort connects to 127.0.0.1:port (or [::1]:port) inside the
	// sandbox. Nothing listening there is Unavailable, at once.
	DialPort(ctx context.Context, port int) (net.Conn, error)
}

// Forwarder is implemented by sandboxes that can reach a host address
// without any network of their own (Capabilities.Forward).
type Forwarder interface {
	// Forward listens on 127.0.0.1:port inside the sandbox and connects
	// each connection made there to hostAddr (host:port, dialled from the
	// host) until the returned Closer is closed or the handle is. It opens
	// nothing else: the sandbox reaches hostAddr and no other address. A
	// port already in use in the sandbox is AlreadyExists.
	Forward(ctx context.Context, port int, hostAddr string) (io.Closer, error)
}

// Derive returns c with every capability that follows from an optional
// interface set from the interfaces the driver's types implement: P is
// the driver's Provider type, S its Sandbox handle type and R its Process
// type. What c said of those fields is discarded. Type assertions on the
// zero values work for pointer types (a nil *T still has T's methods),
// which is what drivers use.
func Derive[P Provider, S Sandbox, R Process](c Capabilities) Capabilities {
	var p P
	var s S
	var r R
	_, c.SetTimeout = any(s).(TimeoutSetter)
	_, c.Signal = any(r).(Signaler)
	_, c.Pause = any(s).(Pauser)
	_, c.Snapshot = any(s).(Snapshotter)
	_, c.Fork = any(s).(Forker)
	_, c.TreeUpload = any(s).(TreeUploader)
	_, c.TreeDownload = any(s).(TreeDownloader)
	_, c.Envd = any(s).(EnvdServer)
	_, c.PrepareImage = any(p).(ImagePreparer)
	_, c.Reap = any(p).(Reaper)
	_, c.DialPort = any(s).(PortDialer)
	_, c.Forward = any(s).(Forwarder)
	if _, ok := any(s).(Endpointer); !ok {
		c.Ports, c.PortsAtCreate = nil, false
	}
	if !c.SetTimeout {
		c.MinTimeout = 0
	}
	return c
}
