package envd

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-sh/berth/envd/envdproto"
)

// serveFiles answers GET and POST /files.
func (s *Server) serveFiles(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	} else if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD, POST")
		writeHTTPError(w, http.StatusMethodNotAllowed, "method %s not allowed", r.Method)
		return
	}
	if !s.filesAuthorized(r, op) {
		writeHTTPError(w, http.StatusUnauthorized, "missing or invalid access token")
		return
	}
	c, err := s.resolveCaller(q.Get("username"))
	if err != nil {
		writeHTTPError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if op == "read" {
		s.download(w, r, c, q.Get("path"))
		return
	}
	s.upload(w, r, c, q.Get("path"), q.Get("mode"))
}

func (s *Server) download(w http.ResponseWriter, r *http.Request, c caller, raw string) {
	p, err := s.resolvePath(raw, c)
	if err != nil {
		writeHTTPError(w, http.StatusBadRequest, "path: %v", err)
		return
	}
	// O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		writeHTTPError(w, httpStatusOf(err), "%v", err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		writeHTTPError(w, httpStatusOf(err), "%v", err)
		return
	}
	if fi.IsDir() {
		writeHTTPError(w, http.StatusBadRequest, "%s is a directory", p)
		return
	}
	if !fi.Mode().IsRegular() {
		// A FIFO or device would block or never end.
		writeHTTPError(w, http.StatusBadRequest, "%s is not a regular file", p)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": fi.Name()}))
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

// upload takes an application/octet-stream body or multipart/form-data with
// one or more `file` fields. Each file is written to a temporary file beside
// its destination and renamed over it, so that a failed upload leaves the old
// file whole and a planted symlink at the destination is replaced, not
// followed.
func (s *Server) upload(w http.ResponseWriter, r *http.Request, c caller, rawPath, rawMode string) {
	r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxUploadBytes)
	var mode *os.FileMode
	if rawMode != "" {
		m, err := strconv.ParseUint(rawMode, 8, 32)
		if err != nil || m > 0o7777 {
			writeHTTPError(w, http.StatusBadRequest, "mode %q is not octal permission bits", rawMode)
			return
		}
		fm := os.FileMode(m)
		mode = &fm
	}
	var written []envdproto.FileUpload
	save := func(raw string, body io.Reader) bool {
		p, err := s.resolvePath(raw, c)
		if err != nil {
			writeHTTPError(w, http.StatusBadRequest, "path: %v", err)
			return false
		}
		if err := writeFileAtomic(p, body, mode, c.acct); err != nil {
			writeHTTPError(w, httpStatusOf(err), "write %s: %v", p, err)
			return false
		}
		written = append(written, envdproto.FileUpload{Path: p, Name: filepath.Base(p), Type: "file"})
		return true
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "multipart/form-data":
		mr, err := r.MultipartReader()
		if err != nil {
			writeHTTPError(w, http.StatusBadRequest, "multipart: %v", err)
			return
		}
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				writeHTTPError(w, httpStatusOf(err), "multipart: %v", err)
				return
			}
			if part.FormName() != "file" {
				_ = part.Close()
				continue
			}
			dest := rawPath
			if dest == "" {
				// Part.FileName keeps only the base name; the SDKs put the
				// whole destination path in filename.
				_, dp, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
				dest = dp["filename"]
			} else if len(written) > 0 {
				writeHTTPError(w, http.StatusBadRequest, "one path was given for several files")
				return
			}
			ok := save(dest, part)
			_ = part.Close()
			if !ok {
				return
			}
		}
	case "application/octet-stream", "":
		if !save(rawPath, r.Body) {
			return
		}
	default:
		writeHTTPError(w, http.StatusUnsupportedMediaType, "content type %q is not multipart/form-data or application/octet-stream", ct)
		return
	}
	if len(written) == 0 {
		writeHTTPError(w, http.StatusBadRequest, "no file in the request")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(written)
}

// writeFileAtomic writes body to p through a temporary file in the same
// directory. New files get mode or 0644; an existing file keeps its mode and
// owner unless mode or a user says otherwise.
func writeFileAtomic(p string, body io.Reader, mode *os.FileMode, a *account) error {
	dir := filepath.Dir(p)
	if err := mkdirAllOwned(dir, a); err != nil {
		return err
	}
	perm := os.FileMode(0o644)
	uid, gid := -1, -1
	if fi, err := os.Lstat(p); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("%s is a directory: %w", p, syscall.EISDIR)
		}
		if fi.Mode().IsRegular() {
			perm = fi.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				uid, gid = int(st.Uid), int(st.Gid)
			}
		}
	}
	if mode != nil {
		perm = *mode
	}
	if needsCredential(a) {
		uid, gid = int(a.uid), int(a.gid)
	}
	f, err := os.CreateTemp(dir, ".berth-upload-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err := io.Copy(f, body); err != nil {
		return err
	}
	if uid >= 0 && (uid != os.Geteuid() || gid != os.Getegid()) {
		if err := f.Chown(uid, gid); err != nil {
			return err
		}
	}
	if err := f.Chmod(unixToFileMode(perm)); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		return err
	}
	ok = true
	return nil
}

// unixToFileMode accepts either numbering for setuid/setgid/sticky.
func unixToFileMode(m os.FileMode) os.FileMode {
	out := m & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)
	if m&0o4000 != 0 {
		out |= os.ModeSetuid
	}
	if m&0o2000 != 0 {
		out |= os.ModeSetgid
	}
	if m&0o1000 != 0 {
		out |= os.ModeSticky
	}
	return out
}

// filesAuthorized checks X-Access-Token, or else an envd signature:
// v1_ + unpadded base64(sha256("path:operation:user:token[:expiration]")).
func (s *Server) filesAuthorized(r *http.Request, op string) bool {
	if s.opts.AccessToken == "" || s.tokenOK(r.Header) {
		return true
	}
	q := r.URL.Query()
	sig := q.Get("signature")
	if sig == "" {
		return false
	}
	exp := q.Get("signature_expiration")
	if exp != "" {
		n, err := strconv.ParseInt(exp, 10, 64)
		if err != nil || time.Now().Unix() > n {
			return false
		}
	}
	want := FileSignature(q.Get("path"), op, q.Get("username"), s.opts.AccessToken, exp)
	return subtle.ConstantTimeCompare([]byte(sig), []byte(want)) == 1
}

// FileSignature computes the envd signature that lets a URL read ("read")
// or write ("write") one path without the access token; expiration is unix
// seconds, or "" for none.
func FileSignature(path, operation, user, token, expiration string) string {
	s := strings.Join([]string{path, operation, user, token}, ":")
	if expiration != "" {
		s += ":" + expiration
	}
	sum := sha256.Sum256([]byte(s))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

func writeHTTPError(w http.ResponseWriter, status int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Disposition")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(envdproto.HTTPError{Code: status, Message: fmt.Sprintf(format, args...)})
}
