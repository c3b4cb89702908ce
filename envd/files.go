package envd

import (
	"compress/gzip"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth/envd/envdproto"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// serveFiles answers GET, HEAD and POST /files.
func (s *Server) serveFiles(w http.ResponseWriter, r *http.Request) {
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	} else if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD, POST")
		WriteHTTPError(w, http.StatusMethodNotAllowed, "method %s not allowed", r.Method)
		return
	}
	if !s.filesAuthorized(r, op) {
		WriteHTTPError(w, http.StatusUnauthorized, "missing or invalid access token")
		return
	}
	user := r.URL.Query().Get("username")
	if op == "read" {
		s.download(w, r, user)
		return
	}
	s.upload(w, r, user)
}

func (s *Server) download(w http.ResponseWriter, r *http.Request, user string) {
	p, err := s.b.Path(user, r.URL.Query().Get("path"))
	if err != nil {
		WriteHTTPError(w, http.StatusBadRequest, "%v", err)
		return
	}
	f, err := s.b.Open(r.Context(), p)
	if err != nil {
		WriteHTTPError(w, httpStatusOf(err), "%v", err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
	if rs, ok := f.ReadCloser.(io.ReadSeeker); ok {
		http.ServeContent(w, r, "", f.ModTime, rs)
		return
	}
	if f.Size >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(f.Size, 10))
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	// Past the header an error can only cut the body short, which the
	// client sees as a length mismatch.
	_, _ = io.Copy(w, f)
}

// upload takes an application/octet-stream body (gzip-encoded or not) or
// multipart/form-data with one or more `file` fields. ?mode= is berth's
// extension (octal permission bits); upstream envd ignores it.
func (s *Server) upload(w http.ResponseWriter, r *http.Request, user string) {
	limit := s.opts.MaxUploadBytes
	if r.ContentLength > limit {
		WriteHTTPError(w, http.StatusRequestEntityTooLarge, "body of %d bytes is over the %d-byte limit", r.ContentLength, limit)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	var mode *uint32
	if raw := r.URL.Query().Get("mode"); raw != "" {
		m, err := strconv.ParseUint(raw, 8, 32)
		if err != nil || m > 0o7777 {
			WriteHTTPError(w, http.StatusBadRequest, "mode %q is not octal permission bits", raw)
			return
		}
		m32 := uint32(m)
		mode = &m32
	}
	rawPath := r.URL.Query().Get("path")
	var written []envdproto.FileUpload
	save := func(raw string, body io.Reader) bool {
		p, err := s.b.Path(user, raw)
		if err != nil {
			WriteHTTPError(w, http.StatusBadRequest, "%v", err)
			return false
		}
		lr := &limitReader{r: body, left: limit}
		if err := s.b.Write(r.Context(), user, p, lr, mode); err != nil {
			status := httpStatusOf(err)
			if mbe := (*http.MaxBytesError)(nil); lr.over || errors.As(lr.err, &mbe) {
				status = http.StatusRequestEntityTooLarge
			}
			WriteHTTPError(w, status, "write %s: %v", p, err)
			return false
		}
		written = append(written, envdproto.FileUpload{Path: p, Name: path.Base(p), Type: "file"})
		return true
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "multipart/form-data":
		mr, err := r.MultipartReader()
		if err != nil {
			WriteHTTPError(w, http.StatusBadRequest, "multipart: %v", err)
			return
		}
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				WriteHTTPError(w, httpStatusOf(err), "multipart: %v", err)
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
				WriteHTTPError(w, http.StatusBadRequest, "one path was given for several files")
				return
			}
			ok := save(dest, part)
			_ = part.Close()
			if !ok {
				return
			}
		}
	case "application/octet-stream", "":
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				WriteHTTPError(w, http.StatusBadRequest, "gzip: %v", err)
				return
			}
			defer zr.Close()
			body = zr
		}
		if !save(rawPath, body) {
			return
		}
	default:
		WriteHTTPError(w, http.StatusUnsupportedMediaType, "content type %q is not multipart/form-data or application/octet-stream", ct)
		return
	}
	if len(written) == 0 {
		WriteHTTPError(w, http.StatusBadRequest, "no file in the request")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(written)
}

// limitReader fails once more than left bytes were read (a gzip body can
// grow past the wire limit) and remembers why it failed, so that the
// answer is 413 whatever the backend made of the failed read.
type limitReader struct {
	r    io.Reader
	left int64
	over bool
	err  error
}

func (l *limitReader) Read(b []byte) (int, error) {
	if l.left < 0 {
		return 0, l.err
	}
	n, err := l.r.Read(b)
	l.left -= int64(n)
	if l.left < 0 {
		l.over = true
		l.err = errdefs.Errorf(errdefs.ResourceExhausted, "upload is over the limit")
		return 0, l.err
	}
	if err != nil && err != io.EOF {
		l.err = err
	}
	return n, err
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
