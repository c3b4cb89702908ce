package dataplane

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"

	"github.com/berth-sh/berth/envd/envdproto"
	"github.com/berth-sh/berth/sandbox"
)

var errSandboxGone = errors.New("the sandbox was deleted")

// serveFiles answers GET and POST /files. ?username= is accepted and
// ignored: the sandbox API moves files as the sandbox's own user.
func (h *Handler) serveFiles(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		h.download(w, r)
	case http.MethodPost:
		h.upload(w, r)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		WriteHTTPError(w, http.StatusMethodNotAllowed, "method %s not allowed", r.Method)
	}
}

func (h *Handler) download(w http.ResponseWriter, r *http.Request) {
	p, err := ResolvePath(r.URL.Query().Get("path"), h.opts.HomeDir)
	if err != nil {
		WriteHTTPError(w, http.StatusBadRequest, "%v", err)
		return
	}
	fi, err := h.sb.Stat(r.Context(), p)
	if err != nil {
		WriteHTTPError(w, StatusOf(err), "%v", err)
		return
	}
	if fi.Type == sandbox.FileDir {
		WriteHTTPError(w, http.StatusBadRequest, "%s is a directory", p)
		return
	}
	rc, err := h.sb.Open(r.Context(), p)
	if err != nil {
		WriteHTTPError(w, StatusOf(err), "%v", err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
	if fi.Type == sandbox.FileRegular {
		w.Header().Set("Content-Length", strconv.FormatInt(fi.Size, 10))
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	// Past the header an error can only cut the body short, which the
	// client sees as a length mismatch.
	_, _ = io.Copy(w, rc)
}

// upload takes application/octet-stream (optionally gzip-encoded) or
// multipart/form-data with one or more `file` fields.
func (h *Handler) upload(w http.ResponseWriter, r *http.Request) {
	limit := h.opts.MaxUploadBytes
	if r.ContentLength > limit {
		WriteHTTPError(w, http.StatusRequestEntityTooLarge, "body of %d bytes is over the %d-byte limit", r.ContentLength, limit)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	rawPath := r.URL.Query().Get("path")
	// ?mode= is berth's extension (octal permission bits); upstream envd
	// ignores it and so may clients.
	mode := fs.FileMode(0o644)
	if raw := r.URL.Query().Get("mode"); raw != "" {
		m, err := strconv.ParseUint(raw, 8, 32)
		if err != nil || m > 0o777 || m == 0 {
			WriteHTTPError(w, http.StatusBadRequest, "mode %q is not octal permission bits", raw)
			return
		}
		mode = fs.FileMode(m)
	}
	var written []envdproto.FileUpload
	save := func(raw string, body io.Reader) bool {
		p, err := ResolvePath(raw, h.opts.HomeDir)
		if err != nil {
			WriteHTTPError(w, http.StatusBadRequest, "%v", err)
			return false
		}
		lr := &limitReader{r: body, left: limit}
		if err := h.sb.WriteFrom(r.Context(), p, lr, mode); err != nil {
			status := StatusOf(err)
			if lr.over {
				status = http.StatusRequestEntityTooLarge
			} else if mbe := (*http.MaxBytesError)(nil); errors.As(lr.err, &mbe) {
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
				WriteHTTPError(w, StatusOf(err), "multipart: %v", err)
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
// grow past the wire limit) and remembers why it failed.
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
		l.err = fmt.Errorf("upload is over the limit: %w", sandbox.ErrResourceExhausted)
		return 0, l.err
	}
	if err != nil && err != io.EOF {
		l.err = err
	}
	return n, err
}
