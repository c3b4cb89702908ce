package e2bserve

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/hosttar"
	"github.com/berth-sh/berth/serve/internal/core"
)

// A COPY step's files reach the server as E2B's do: the SDK asks
// GET /templates/{templateID}/files/{hash} whether the archive of hash is
// present, and when it is not, PUTs the archive (a tar, gzip by default)
// to the URL in the answer, which here is the same path on this server,
// signed, since the SDK sends no API key with it (E2B answers a presigned
// storage URL). Archives are kept per API key, under the hash the SDK
// computed: one key never sees, or builds from, another's uploads, and a
// client that names its files by a wrong hash only misleads itself.
//
// An upload is checked as the build will use it: unpacked with the bounds
// (MaxUnpackedBytes, MaxFiles) through package hosttar, which refuses
// absolute names, ".." elements and symlinks leading out, into a scratch
// directory that is removed at once, one upload at a time. A build unpacks
// it again, the same way, into its own context.

// uploadURLLife is how long a signed upload URL is good for.
const uploadURLLife = time.Hour

// uploadPath is where the key's archive of hash is kept.
func (t *templates) uploadPath(keyID, hash string) string {
	return filepath.Join(t.dir, "uploads", keyID, hash+".tar")
}

// present reports whether the key uploaded the archive of hash.
func (t *templates) present(keyID, hash string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.key(keyID).uploads[hash]
	return ok
}

func (t *templates) sign(templateID, hash, expires string) string {
	m := hmac.New(sha256.New, t.secret)
	fmt.Fprintf(m, "upload\n%s\n%s\n%s", templateID, hash, expires)
	return hex.EncodeToString(m.Sum(nil))
}

// filesRoute is /templates/{templateID}/files/{hash}: GET (API key) asks
// for the upload link, PUT (signed URL) uploads.
func (s *API) filesRoute(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		s.keyed(map[string]keyedFunc{"GET": s.fileLink})(w, r)
	case http.MethodPut:
		s.upload(w, r)
	default:
		w.Header().Set("Allow", "GET, PUT")
		writeError(w, http.StatusMethodNotAllowed, "method %s is not allowed on %s", r.Method, r.URL.Path)
	}
}

// fileLink answers TemplateBuildFileUpload: present, or where to PUT.
func (s *API) fileLink(w http.ResponseWriter, r *http.Request, keyID string) {
	if !s.buildsServed(w) {
		return
	}
	tm := s.tpl.owned(keyID, r.PathValue("templateID"))
	if tm == nil {
		writeError(w, http.StatusNotFound, "template %q not found", r.PathValue("templateID"))
		return
	}
	hash := r.PathValue("hash")
	if !filesHashRe.MatchString(hash) {
		writeError(w, http.StatusBadRequest, "files hash %q is not 64 lowercase hex digits", hash)
		return
	}
	if s.tpl.present(keyID, hash) {
		writeJSON(w, http.StatusCreated, e2bapi.TemplateBuildFileUpload{Present: true})
		return
	}
	exp := strconv.FormatInt(time.Now().Add(uploadURLLife).Unix(), 10)
	q := url.Values{"expires": {exp}, "signature": {s.tpl.sign(tm.id, hash, exp)}}
	u := requestBase(r) + e2bapi.Path(e2bapi.RouteTemplateFile, tm.id, hash) + "?" + q.Encode()
	writeJSON(w, http.StatusCreated, e2bapi.TemplateBuildFileUpload{URL: u})
}

// requestBase is the scheme and host the client called.
func requestBase(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// upload takes a signed PUT of an archive. Errors are plain statuses and
// JSON bodies, which the SDK reports by status text.
func (s *API) upload(w http.ResponseWriter, r *http.Request) {
	if !s.buildsServed(w) {
		return
	}
	tid, hash := r.PathValue("templateID"), r.PathValue("hash")
	q := r.URL.Query()
	exp, sig := q.Get("expires"), q.Get("signature")
	if !filesHashRe.MatchString(hash) || sig == "" || expired(exp) || !core.SecretEqual(sig, s.tpl.sign(tid, hash, exp)) {
		s.m.AuthFails.WithLabelValues("control").Inc()
		writeError(w, http.StatusForbidden, "the upload URL is not valid (wrong or expired signature); ask for a new one")
		return
	}
	s.tpl.mu.Lock()
	tm := s.tpl.byID[tid]
	s.tpl.mu.Unlock()
	if tm == nil {
		writeError(w, http.StatusNotFound, "template %q not found", tid)
		return
	}
	if s.tpl.present(tm.keyID, hash) {
		w.WriteHeader(http.StatusOK) // the hash names the same files: nothing to read
		return
	}
	limit := s.tpl.opts.MaxUploadBytes
	if r.ContentLength > limit {
		writeError(w, http.StatusRequestEntityTooLarge, "the archive of %d bytes is over this server's limit of %s per upload", r.ContentLength, hosttar.FormatBytes(limit))
		return
	}
	size := r.ContentLength // the SDK sends it; a chunked body may take the limit
	if size < 0 {
		size = limit
	}
	body := &pacedBody{r: http.MaxBytesReader(w, r.Body, limit), rc: http.NewResponseController(w),
		grace: s.tpl.opts.UploadGrace, rate: s.tpl.opts.MinUploadRate}
	defer body.done()
	status, err := s.tpl.store(r.Context(), tm.keyID, hash, size, body)
	switch {
	case status == http.StatusTooManyRequests:
		writeRetry(w, time.Second, "%v", err)
	case err != nil:
		writeError(w, status, "%v", err)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

// pacedBody reads an upload under a minimum average rate: its read
// deadline is grace after the first read plus the time the bytes read so
// far take at rate, so a client sending slower than rate runs out of time
// whatever it sends in between, and one that stops sending does too.
type pacedBody struct {
	r     io.Reader
	rc    *http.ResponseController
	grace time.Duration
	rate  int64 // bytes per second
	start time.Time
	n     int64
}

func (p *pacedBody) Read(b []byte) (int, error) {
	if p.start.IsZero() {
		p.start = time.Now()
	}
	allowed := p.grace + time.Duration(p.n/p.rate)*time.Second + time.Duration(p.n%p.rate)*time.Second/time.Duration(p.rate)
	if err := p.rc.SetReadDeadline(p.start.Add(allowed)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return 0, err
	}
	n, err := p.r.Read(b)
	p.n += int64(n)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return n, sandbox.Errorf(sandbox.DeadlineExceeded, "the upload sent %d bytes in %v, slower than this server's minimum of %s/s (after the first %v)",
			p.n, time.Since(p.start).Round(time.Millisecond), hosttar.FormatBytes(p.rate), p.grace)
	}
	return n, err
}

// done lifts the deadline, for what the connection reads next.
func (p *pacedBody) done() { _ = p.rc.SetReadDeadline(time.Time{}) }

// store keeps body, of at most size bytes, as the key's archive of hash
// once it passes the checks; the status is that of the error. It waits for
// one of the key's upload turns first. Uploads in flight count against the
// key's storage as their size says, so that parallel ones cannot pass it
// either.
func (t *templates) store(ctx context.Context, keyID, hash string, size int64, body io.Reader) (int, error) {
	t.mu.Lock()
	k := t.key(keyID)
	t.mu.Unlock()
	release, err := t.uploadTurn(ctx, k)
	if err != nil {
		return http.StatusTooManyRequests, err
	}
	defer release()
	t.mu.Lock()
	if k.stored+k.pending+size > t.opts.MaxStoredBytesPerKey {
		t.mu.Unlock()
		return http.StatusInsufficientStorage, sandbox.Errorf(sandbox.ResourceExhausted, "this API key's uploads would pass the %s this server keeps per key", hosttar.FormatBytes(t.opts.MaxStoredBytesPerKey))
	}
	k.pending += size
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		k.pending -= size
		t.mu.Unlock()
	}()
	dir := filepath.Dir(t.uploadPath(keyID, hash))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return http.StatusInternalServerError, err
	}
	f, err := os.CreateTemp(dir, ".upload-*")
	if err != nil {
		return http.StatusInternalServerError, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	n, err := io.Copy(f, body)
	var mbe *http.MaxBytesError
	switch {
	case sandbox.ClassOf(err) == sandbox.DeadlineExceeded:
		return http.StatusRequestTimeout, err
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, sandbox.Errorf(sandbox.ResourceExhausted, "the archive is over this server's limit of %s per upload", hosttar.FormatBytes(t.opts.MaxUploadBytes))
	case err != nil:
		return http.StatusBadRequest, fmt.Errorf("reading the upload: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return http.StatusInternalServerError, err
	}
	if err := t.check(ctx, f); err != nil {
		if sandbox.ClassOf(err) == sandbox.ResourceExhausted {
			return http.StatusRequestEntityTooLarge, err
		}
		return http.StatusBadRequest, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := k.uploads[hash]; ok {
		return http.StatusOK, nil // uploaded meanwhile; the hash names the same files
	}
	if err := os.Rename(f.Name(), t.uploadPath(keyID, hash)); err != nil {
		return http.StatusInternalServerError, err
	}
	k.uploads[hash] = n
	k.stored += n
	return http.StatusOK, nil
}

// uploadTurn waits up to UploadGrace for one of the key's upload turns;
// release gives it back.
func (t *templates) uploadTurn(ctx context.Context, k *keyTemplates) (release func(), err error) {
	timer := time.NewTimer(t.opts.UploadGrace)
	defer timer.Stop()
	select {
	case k.turns <- struct{}{}:
		return func() { <-k.turns }, nil
	case <-timer.C:
		return nil, sandbox.Errorf(sandbox.ResourceExhausted, "this API key has %d uploads in flight, the most this server receives at once; retry when one has ended", cap(k.turns))
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// check unpacks an archive into a scratch directory with the bounds,
// one archive at a time (checks), so that scratch space stays within
// MaxUnpackedBytes however many uploads arrive at once.
func (t *templates) check(ctx context.Context, f io.Reader) error {
	select {
	case t.checks <- struct{}{}:
		defer func() { <-t.checks }()
	case <-ctx.Done():
		return ctx.Err()
	}
	scratch, err := os.MkdirTemp(filepath.Join(t.dir, "uploads"), ".check-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	return t.unpack(ctx, f, scratch)
}

// unpackUpload unpacks the key's archive of hash into dir.
func (t *templates) unpackUpload(ctx context.Context, keyID, hash, dir string) error {
	f, err := os.Open(t.uploadPath(keyID, hash))
	if err != nil {
		return err
	}
	defer f.Close()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return t.unpack(ctx, f, dir)
}

// unpack extracts a tar, plain or gzip, into dir within the bounds.
func (t *templates) unpack(ctx context.Context, f io.Reader, dir string) error {
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return sandbox.Errorf(sandbox.InvalidArgument, "the archive is not valid gzip: %v", err)
		}
		defer zr.Close()
		r = zr
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	_, err = hosttar.ExtractWith(ctx, root, r, hosttar.Options{MaxBytes: t.opts.MaxUnpackedBytes, MaxEntries: t.opts.MaxFiles})
	var le *hosttar.LimitError
	switch {
	case errors.As(err, &le) && le.What == "entries":
		return sandbox.Classify(sandbox.ResourceExhausted, fmt.Errorf("the archive has more than the %d files this server takes in one upload", t.opts.MaxFiles))
	case errors.As(err, &le):
		return sandbox.Classify(sandbox.ResourceExhausted, fmt.Errorf("the archive's files unpacked pass this server's limit of %s per upload", hosttar.FormatBytes(t.opts.MaxUnpackedBytes)))
	case err != nil:
		return fmt.Errorf("the archive cannot be unpacked here: %w", err)
	}
	return nil
}
