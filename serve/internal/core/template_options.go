package core

import (
	"time"

	"github.com/berth-sh/berth/sandbox"
)

// TemplateBuildOptions configure E2B template builds (the routes of the
// SDKs' Template.build). Zero fields take the defaults named.
type TemplateBuildOptions struct {
	// Disabled answers the template build routes 501, as for a provider
	// that cannot build.
	Disabled bool
	// Dir holds uploaded files and build contexts. "" means a directory
	// of the server's own under the system's temporary directory, removed
	// at Close; uploads then last as long as the server.
	Dir string
	// MaxUploadBytes bounds one uploaded archive as sent (gzip); 256 MiB.
	MaxUploadBytes int64
	// MaxUnpackedBytes bounds one archive's files unpacked; 1 GiB.
	MaxUnpackedBytes int64
	// MaxFiles bounds the entries of one archive; 10,000.
	MaxFiles int
	// MaxStoredBytesPerKey bounds the archives one API key keeps
	// uploaded; 2 GiB.
	MaxStoredBytesPerKey int64
	// MinUploadRate is the slowest an upload may send, in bytes per
	// second averaged from its first read, once UploadGrace has passed: a
	// slower one is cut off and answered 408. 64 KiB/s.
	MinUploadRate int64
	// UploadGrace is the time an upload has before MinUploadRate counts,
	// and the longest an upload waits for its turn; 30 s.
	UploadGrace time.Duration
	// MaxUploadsPerKey bounds one key's uploads being received at once
	// (the SDK sends a template's archives all at once); more wait up to
	// UploadGrace for a turn, then are answered 429. 4.
	MaxUploadsPerKey int
	// MaxSteps bounds the steps of one template; 256.
	MaxSteps int
	// MaxLogBytes bounds the log kept of one build; past it lines are
	// counted, not kept, except the last ones, which end the log. 1 MiB.
	MaxLogBytes int
	// BuildTimeout bounds one build from its start (waiting for another
	// build of the same template does not count); 30 min.
	BuildTimeout time.Duration
	// MaxConcurrentBuildsPerKey bounds one key's builds started and not
	// finished (running or waiting for their template); more is answered
	// 429. 2.
	MaxConcurrentBuildsPerKey int
	// MaxTemplatesPerKey bounds the templates (aliases) one key holds;
	// 100.
	MaxTemplatesPerKey int
	// ReadyTimeout bounds the wait for a template's ready command, at the
	// end of its build and at each create from it; 2 min.
	ReadyTimeout time.Duration
}

func (o *TemplateBuildOptions) fill() error {
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxUploadBytes, 256<<20)
	def(&o.MaxUnpackedBytes, 1<<30)
	def(&o.MaxStoredBytesPerKey, 2<<30)
	def(&o.MinUploadRate, 64<<10)
	defInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defInt(&o.MaxFiles, 10_000)
	defInt(&o.MaxSteps, 256)
	defInt(&o.MaxLogBytes, 1<<20)
	defInt(&o.MaxConcurrentBuildsPerKey, 2)
	defInt(&o.MaxTemplatesPerKey, 100)
	defInt(&o.MaxUploadsPerKey, 4)
	if o.UploadGrace <= 0 {
		o.UploadGrace = 30 * time.Second
	}
	if o.BuildTimeout <= 0 {
		o.BuildTimeout = 30 * time.Minute
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 2 * time.Minute
	}
	if o.MaxUploadBytes > o.MaxStoredBytesPerKey {
		return sandbox.Errorf(sandbox.InvalidArgument, "serve: one upload (%d bytes) may not be larger than what a key may store (%d bytes)", o.MaxUploadBytes, o.MaxStoredBytesPerKey)
	}
	return nil
}
