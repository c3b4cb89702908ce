package dataplane

import (
	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/sandbox"
)

// Options configure New.
type Options struct {
	// HomeDir is the working directory of commands that name none and the
	// base of relative paths, as the default user's home is in envd; it is
	// used only when it exists in the sandbox. "" means "/root".
	HomeDir string
	// MaxUploadBytes bounds one POST /files body (after decompression); 0
	// means 1 GiB. More is refused with 413.
	MaxUploadBytes int64
	// MaxMessageBytes bounds one Connect request message; 0 means 8 MiB.
	MaxMessageBytes int64
	// MaxListEntries bounds one ListDir answer; 0 means 10,000 (each
	// directory is a call to the provider).
	MaxListEntries int
	// OnExec, when set, is called once per process started (for metrics).
	OnExec func()
}

func (o *Options) fill() {
	if o.HomeDir == "" {
		o.HomeDir = "/root"
	}
	if o.MaxUploadBytes <= 0 {
		o.MaxUploadBytes = 1 << 30
	}
	if o.MaxListEntries <= 0 {
		o.MaxListEntries = 10_000
	}
}

// New returns the data plane of sb: envd's protocol server over a backend
// that translates every call into the sandbox API. The caller keeps
// ownership of sb. Closing the server ends the streams of its processes
// (with an end event saying why) but does not kill them: deleting the
// sandbox does that.
func New(sb *sandbox.Sandbox, opts Options) (*envd.Server, error) {
	opts.fill()
	return envd.New(&backend{sb: sb, home: opts.HomeDir}, envd.Options{
		MaxMessageBytes: opts.MaxMessageBytes,
		MaxUploadBytes:  opts.MaxUploadBytes,
		MaxListEntries:  opts.MaxListEntries,
		OnStart:         opts.OnExec,
	})
}
