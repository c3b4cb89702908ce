package daytonatest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-sh/berth/internal/testing/fakeengine"
)

// bulkUpload answers POST /files/bulk-upload, the SDKs' upload: a
// multipart body of parts files[i].path (the destination) and files[i].file
// (its bytes), in that order, each file written as it streams in, parents
// made. Problems are collected: 400 {errors, files}, else 200 {files}.
func (s *Server) bulkUpload(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	mr, err := r.MultipartReader()
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"errors": []string{"invalid multipart form"}})
		return
	}
	type result struct {
		Path  string `json:"path"`
		Bytes int64  `json:"bytes"`
	}
	dests := map[string]string{}
	errs := []string{}
	files := []result{}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("reading part: %v", err))
			break
		}
		name := part.FormName()
		idx := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(name, "files["), "].path"), "].file")
		switch {
		case strings.HasSuffix(name, ".path"):
			b, err := io.ReadAll(io.LimitReader(part, 4096))
			dest := strings.TrimSpace(string(b))
			if err != nil || dest == "" {
				errs = append(errs, fmt.Sprintf("path[%s]: empty path", idx))
				continue
			}
			dests[idx] = dest
		case strings.HasSuffix(name, ".file"):
			dest, ok := dests[idx]
			if !ok {
				errs = append(errs, fmt.Sprintf("file[%s]: missing .path metadata", idx))
				continue
			}
			n, err := sb.eb.WriteFile(sandboxPath(dest), part, 0)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", dest, err))
				continue
			}
			files = append(files, result{Path: dest, Bytes: n})
		}
	}
	if len(errs) > 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"errors": errs, "files": files})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"files": files})
}

// downloadBoundary is the daemon's multipart boundary.
const downloadBoundary = "DAYTONA-FILE-BOUNDARY"

// bulkDownload answers POST /files/bulk-download {paths}: a multipart
// answer with a part per path, named "file" with the bytes, or "error"
// with the daemon's error JSON; each part's filename is the path asked for.
func (s *Server) bulkDownload(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Paths []string `json:"paths"`
	}
	if err := readJSON(r, &req); err != nil || len(req.Paths) == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": `request body must be {"paths": [ ... ]} and non-empty`})
		return
	}
	mw := multipart.NewWriter(w)
	_ = mw.SetBoundary(downloadBoundary)
	w.Header().Set("Content-Type", "multipart/form-data; boundary="+downloadBoundary)
	w.WriteHeader(http.StatusOK)
	for _, p := range req.Paths {
		if err := downloadPart(mw, sb.eb, r.Method, p); err != nil {
			return // cut mid-part: the client sees a short answer, not a short file
		}
	}
	_ = mw.Close()
}

func downloadPart(mw *multipart.Writer, eb *fakeengine.Sandbox, method, p string) error {
	fail := func(status int, code, msg string) error {
		h := textproto.MIMEHeader{}
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("Content-Disposition", disposition("error", p))
		part, err := mw.CreatePart(h)
		if err != nil {
			return err
		}
		return json.NewEncoder(part).Encode(map[string]any{
			"statusCode": status, "message": msg, "code": code, "source": "DAYTONA_DAEMON",
			"timestamp": time.Now().UTC().Format(time.RFC3339Nano), "path": p, "method": method,
		})
	}
	if p == "" {
		return fail(http.StatusBadRequest, "INVALID_FILE_PATH", "invalid file path: path is empty")
	}
	f, fi, err := eb.Open(sandboxPath(p))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fail(http.StatusNotFound, "FILE_NOT_FOUND", "file not found: "+p)
	case errors.Is(err, fs.ErrPermission):
		return fail(http.StatusForbidden, "FILE_ACCESS_DENIED", "access denied: "+p)
	case errors.Is(err, syscall.EISDIR):
		return fail(http.StatusBadRequest, "INVALID_FILE_PATH", "invalid file path: path points to a directory: "+p)
	case err != nil:
		return fail(http.StatusBadRequest, "INVALID_FILE_PATH", "invalid file path: "+p)
	}
	defer f.Close()
	ctype := mime.TypeByExtension(path.Ext(p))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Type", ctype)
	h.Set("Content-Disposition", disposition("file", p))
	h.Set("Content-Length", strconv.FormatInt(fi.Size, 10))
	part, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	_, err = io.Copy(part, f)
	return err
}

// disposition names a part and its file as the daemon does: a Latin-1
// filename and the exact one in RFC 5987 form.
func disposition(name, p string) string {
	latin := strings.Map(func(r rune) rune {
		switch {
		case r == '\r' || r == '\n' || r == 0:
			return -1
		case r < 0x20 || r == 0x7f || r > 0xff:
			return '_'
		}
		return r
	}, strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(p))
	var enc strings.Builder
	for _, b := range []byte(p) {
		if b < 0x80 && (b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || strings.IndexByte("!#$&+-.^_`|~", b) >= 0) {
			enc.WriteByte(b)
		} else {
			fmt.Fprintf(&enc, "%%%02X", b)
		}
	}
	return fmt.Sprintf(`form-data; name="%s"; filename="%s"; filename*=utf-8''%s`, name, latin, enc.String())
}
