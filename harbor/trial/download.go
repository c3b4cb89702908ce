package trial

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/berth-sh/berth/sandbox/hosttar"
)

// DefaultMaxDownloadBytes bounds what one trial downloads from its sandbox
// (the agent's and the verifier's log trees together) when
// Options.MaxDownloadBytes is 0.
const DefaultMaxDownloadBytes = 1 << 30

// MaxDownloadFlag names the setting that moves the download limit, for
// the error that reports it.
const MaxDownloadFlag = "berth run --max-download-mb (trial.Options.MaxDownloadBytes)"

// downloadTimeout bounds one log download.
const downloadTimeout = time.Minute

// downloadLeft is what the trial may still download: -1 for no limit.
func (r *run) downloadLeft() int64 {
	limit := r.o.MaxDownloadBytes
	switch {
	case limit < 0:
		return -1
	case limit == 0:
		limit = DefaultMaxDownloadBytes
	}
	return max(limit-r.downloaded, 0)
}

// download copies the sandbox's tree at from into <trial dir>/to. The tree
// is the sandbox's: it is extracted with every path, link and mode checked
// (hosttar.ExtractWith: nothing lands outside to, no link leads out of it,
// no set-id or world-writable bit) and within what is left of the trial's
// download limit, counted at each file's header, so a sparse 100 GB log
// neither fills the disk nor is read. A failure is logged, never fatal:
// what was extracted before it stays.
func (r *run) download(ctx context.Context, from, to string) {
	if r.sb == nil {
		return
	}
	left := r.downloadLeft()
	if left == 0 {
		r.logf("download %s: skipped: the trial's download limit of %s is used up; raise it with %s",
			from, hosttar.FormatBytes(r.limitBytes()), MaxDownloadFlag)
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), downloadTimeout)
	defer cancel()
	rc, err := r.sb.Download(dctx, from)
	if err != nil {
		r.logf("download %s: %v", from, err)
		return
	}
	defer rc.Close()
	dst := filepath.Join(r.o.Dir, to)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		r.logf("download %s: %v", from, err)
		return
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		r.logf("download %s: %v", from, err)
		return
	}
	defer root.Close()
	st, err := hosttar.ExtractWith(dctx, root, rc, hosttar.Options{MaxBytes: max(left, 0)})
	r.downloaded += st.Bytes
	var le *hosttar.LimitError
	switch {
	case errors.As(err, &le) && le.What == "bytes":
		r.logf("download %s: stopped at %q: it would take the trial's downloads over their limit of %s; kept the %d files (%s) before it; raise the limit with %s",
			from, le.Entry, hosttar.FormatBytes(r.limitBytes()), st.Files, hosttar.FormatBytes(st.Bytes), MaxDownloadFlag)
	case err != nil:
		r.logf("download %s: %v (kept the %d files before it)", from, err, st.Files)
	}
}

func (r *run) limitBytes() int64 {
	if r.o.MaxDownloadBytes == 0 {
		return DefaultMaxDownloadBytes
	}
	return r.o.MaxDownloadBytes
}
