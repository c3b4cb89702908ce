package envd

import (
	"context"
	"io"
	"time"

	"github.com/berth-sh/berth/envd/envdproto"
	"github.com/berth-sh/berth/sandbox/driver"
)

// Backend is what a Server runs the envd protocol against. The Server owns
// everything the protocol says (routes, codecs, stream framing, keepalives,
// the process table, stdin ordering, limits, tokens, error codes); a
// Backend only starts processes and touches files. There are two: this
// host (NewServer: internal/hostproc and real paths, as the agent inside a sandbox)
// and the sandbox API (package serve/dataplane, for `berth serve`).
//
// Errors are mapped onto Connect codes and HTTP statuses once, by the
// Server: a *connect.Error is kept as it is, a classed error
// (errdefs.Errorf) by its class, an OS error by its errno.
type Backend interface {
	// Path makes a client's path absolute for user ("" means the default
	// user): relative paths and ~ start at the user's home. A path the
	// backend refuses, or an unknown user, is an error; the Server answers
	// it as InvalidArgument.
	Path(user, raw string) (string, error)

	// Start starts a process as spec says. ctx is the process's lifetime,
	// not the request's: the Server cancels it when it closes, and the
	// backend then ends the process, or at least its Wait. Start may set
	// spec.Config.Cwd to the directory it chose; List shows the config as
	// Start leaves it.
	Start(ctx context.Context, spec StartSpec) (BackendProcess, error)

	// Stat describes p without following a final symlink.
	Stat(ctx context.Context, p string) (envdproto.EntryInfo, error)
	// ListDir lists one directory's entries, sorted by name.
	ListDir(ctx context.Context, dir string) ([]envdproto.EntryInfo, error)
	// MakeDir creates p and its parents for user; an existing p, directory
	// or not, is AlreadyExists.
	MakeDir(ctx context.Context, user, p string) error
	// Move renames src (which exists) to dst, creating dst's parents.
	Move(ctx context.Context, user, src, dst string) error
	// Remove deletes a file or a tree; a missing p is NotFound.
	Remove(ctx context.Context, p string) error
	// Open opens a regular file for download; a directory or anything that
	// would not end (a FIFO, a device) is InvalidArgument.
	Open(ctx context.Context, p string) (Download, error)
	// Write replaces the file at p with r, creating parents, owned by user.
	// mode, in chmod(2) numbering, is nil when the client named none: a new
	// file is then 0644 and an existing one may keep its mode.
	Write(ctx context.Context, user, p string, r io.Reader, mode *uint32) error
}

// StartSpec is a validated Start request.
type StartSpec struct {
	// Config is the server's own copy of the request's process (Cmd is set).
	Config *envdproto.ProcessConfig
	// User is the caller named by Authorization: Basic; "" is the default.
	User string
	// Stdin asks for a stdin that BackendProcess.WriteStdin feeds; without
	// it the process reads EOF.
	Stdin bool
	// Timeout, when positive, is the process's lifetime (Connect-Timeout-Ms,
	// as in upstream envd); the end event then says "process timed out".
	Timeout time.Duration
	// Stdout and Stderr receive output as it comes. A Write blocks while a
	// client is slow, which holds the process back, as a pipe would; the
	// bytes are copied, so the backend may reuse its buffer.
	Stdout, Stderr io.Writer
}

// BackendProcess is a process a Backend started.
type BackendProcess interface {
	// PID names the process in the table and the start event.
	PID() int
	// Wait blocks until the process has ended and all its output has been
	// written, and describes the end. It is called once.
	Wait() *envdproto.EndEvent
	// Signal delivers sig; a process that has ended is NotFound.
	Signal(ctx context.Context, sig driver.Signal) error
	// WriteStdin writes data to the process's stdin, giving up when ctx
	// ends. The Server calls it one at a time, and never after CloseStdin.
	WriteStdin(ctx context.Context, data []byte) error
	// CloseStdin closes stdin (a write in flight fails); called once.
	CloseStdin()
}

// Download is a file opened by Backend.Open. When ReadCloser is also an
// io.ReadSeeker the Server answers ranges and conditional requests.
type Download struct {
	io.ReadCloser
	// Size is the length of the body, or -1 when unknown.
	Size int64
	// ModTime is the file's modification time, when known.
	ModTime time.Time
}
