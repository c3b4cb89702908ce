package driver

import (
	"io"
	"time"
)

// Command is a program to run in a sandbox.
type Command struct {
	// Args is the argv; Args[0] is looked up in PATH inside the sandbox.
	// Use []string{"sh", "-c", script} for shell syntax.
	Args []string
	// Env adds to (and overrides) the sandbox's environment.
	Env map[string]string
	// Dir is the working directory; "" means the Spec's WorkDir, else the
	// image's.
	Dir string
	// User runs the command as this user; "" means the Spec's User.
	User string
	// Stdin, when set, is copied to the process's stdin, which is closed at EOF.
	Stdin io.Reader
	// Stdout and Stderr receive output as it arrives; nil discards it. Writes
	// come from one goroutine per stream, so a writer shared by both must be
	// safe for concurrent use.
	Stdout, Stderr io.Writer
	// Timeout kills the command after this long; zero means no limit beyond
	// the caller's context and the sandbox's TTL.
	Timeout time.Duration
}

// Signal is a signal sent to a process, named as in the envd protocol.
type Signal string

// Signals that every provider supports.
const (
	SIGTERM Signal = "SIGTERM"
	SIGKILL Signal = "SIGKILL"
)

// Info describes a sandbox found by List.
type Info struct {
	ID        string            `json:"id"`
	Provider  string            `json:"provider,omitempty"`
	Image     string            `json:"image,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	State     string            `json:"state,omitempty"` // provider's word: running, paused, stopped
	CreatedAt time.Time         `json:"created_at,omitzero"`
	ExpiresAt time.Time         `json:"expires_at,omitzero"` // when the provider-side TTL ends
}

// FileType is the kind of a file system entry.
type FileType string

// File types.
const (
	FileRegular FileType = "file"
	FileDir     FileType = "dir"
	FileSymlink FileType = "symlink"
	FileOther   FileType = "other"
)

// FileInfo describes one entry in a sandbox's file system.
type FileInfo struct {
	Name    string    `json:"name"` // base name
	Path    string    `json:"path"` // absolute path in the sandbox
	Type    FileType  `json:"type"`
	Size    int64     `json:"size"`
	Mode    uint32    `json:"mode"` // permission bits
	ModTime time.Time `json:"mod_time,omitzero"`
	Target  string    `json:"target,omitempty"` // symlink target
}
