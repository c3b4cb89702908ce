package opensandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"

	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/serve/dataplane"
)

// maxMetadataBytes bounds an upload's metadata part.
const maxMetadataBytes = 64 << 10

// multipartSlack is what an upload body may hold beyond the files' bytes:
// boundaries, part headers, metadata.
const multipartSlack = 1 << 20

// upload writes the files of a multipart body: parts in pairs, a metadata
// part ({path, mode}) and then its file part, streamed into the sandbox.
// Parents are created; mode 0 means 644. Owner and group cannot be set
// through the sandbox API and are ignored.
func (e *Execd) upload(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, e.opts.MaxUploadBytes+multipartSlack)
	mr, err := r.MultipartReader()
	if err != nil {
		WriteError(w, http.StatusBadRequest, CodeInvalidFile, "multipart form is empty: "+err.Error())
		return
	}
	var meta *FileMetadata
	files, written := 0, int64(0)
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			e.uploadError(w, err)
			return
		}
		switch part.FormName() {
		case "metadata":
			meta = &FileMetadata{}
			b, err := io.ReadAll(io.LimitReader(part, maxMetadataBytes+1))
			if err == nil && len(b) > maxMetadataBytes {
				err = fmt.Errorf("over %d bytes", maxMetadataBytes)
			}
			if err == nil {
				err = json.Unmarshal(b, meta)
			}
			if err != nil || meta.Path == "" {
				WriteError(w, http.StatusBadRequest, CodeInvalidMetadata, fmt.Sprintf("invalid metadata format (a JSON object with a path). %v", err))
				return
			}
		case "file":
			if meta == nil {
				WriteError(w, http.StatusBadRequest, CodeInvalidFile, "a file part came without a metadata part before it")
				return
			}
			n, err := e.writeUpload(r, part, *meta, e.opts.MaxUploadBytes-written)
			written += n
			if err != nil {
				e.uploadError(w, err)
				return
			}
			files, meta = files+1, nil
		}
		_ = part.Close()
	}
	if files == 0 {
		WriteError(w, http.StatusBadRequest, CodeInvalidFile, "file is missing")
		return
	}
	w.WriteHeader(http.StatusOK)
}

// errTooLarge is an upload past MaxUploadBytes.
var errTooLarge = errors.New("upload is too large")

func (e *Execd) writeUpload(r *http.Request, part io.Reader, meta FileMetadata, room int64) (int64, error) {
	p, err := dataplane.ResolvePath(expandHome(meta.Path, e.opts.HomeDir), e.opts.HomeDir)
	if err != nil {
		return 0, err
	}
	mode, err := modeOf(meta.Mode)
	if err != nil {
		return 0, err
	}
	cr := &countReader{r: part, room: room}
	err = e.sb.WriteFrom(r.Context(), p, cr, mode)
	if cr.over {
		err = errTooLarge
	}
	return cr.n, err
}

// modeOf reads upstream's mode: octal digits written as a decimal number.
func modeOf(m int) (fs.FileMode, error) {
	if m == 0 {
		return 0o644, nil
	}
	v, err := strconv.ParseUint(strconv.Itoa(m), 8, 32)
	if err != nil || v > 0o7777 {
		return 0, sandbox.Errorf(sandbox.InvalidArgument, "mode %d is not an octal permission such as 644 or 755", m)
	}
	return fs.FileMode(v), nil
}

// countReader counts what passes and fails past room bytes.
type countReader struct {
	r    io.Reader
	room int64
	n    int64
	over bool
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.room {
		c.over = true
		return n, errTooLarge
	}
	return n, err
}

func (e *Execd) uploadError(w http.ResponseWriter, err error) {
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, errTooLarge) || errors.As(err, &mbe):
		WriteError(w, http.StatusRequestEntityTooLarge, CodeInvalidFile, fmt.Sprintf("upload is over the %d-byte limit", e.opts.MaxUploadBytes))
	case sandbox.ClassOf(err) == sandbox.InvalidArgument:
		WriteError(w, http.StatusBadRequest, CodeInvalidFile, err.Error())
	default:
		e.opts.Logger.Warn("execd: upload failed", "sandbox", e.sb.ID(), "error", err)
		WriteError(w, http.StatusInternalServerError, CodeRuntimeError, err.Error())
	}
}

// download answers the bytes of ?path=. Range requests get the whole file
// (a server may ignore Range).
func (e *Execd) download(w http.ResponseWriter, r *http.Request) {
	raw := r.URL.Query().Get("path")
	if raw == "" {
		WriteError(w, http.StatusBadRequest, CodeMissingQuery, "missing query parameter 'path'")
		return
	}
	p, err := dataplane.ResolvePath(expandHome(raw, e.opts.HomeDir), e.opts.HomeDir)
	if err != nil {
		WriteError(w, http.StatusBadRequest, CodeInvalidRequest, err.Error())
		return
	}
	fi, err := e.sb.Stat(r.Context(), p)
	if err == nil && fi.Type == sandbox.FileDir {
		err = sandbox.Errorf(sandbox.InvalidArgument, "%s is a directory", p)
	}
	var rc io.ReadCloser
	if err == nil {
		rc, err = e.sb.Open(r.Context(), p)
	}
	if err != nil {
		switch sandbox.ClassOf(err) {
		case sandbox.NotFound:
			WriteError(w, http.StatusNotFound, CodeFileNotFound, fmt.Sprintf("file not found: %s", p))
		case sandbox.InvalidArgument:
			WriteError(w, http.StatusBadRequest, CodeInvalidRequest, err.Error())
		default:
			WriteError(w, http.StatusInternalServerError, CodeRuntimeError, err.Error())
		}
		return
	}
	defer rc.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
	if fi.Type == sandbox.FileRegular {
		h.Set("Content-Length", strconv.FormatInt(fi.Size, 10))
	}
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, rc); err != nil {
		e.opts.Logger.Debug("execd: download cut short", "sandbox", e.sb.ID(), "error", err)
	}
}
