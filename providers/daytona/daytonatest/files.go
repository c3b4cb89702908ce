package daytonatest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-sh/berth/internal/testing/fakeengine"
)

// fileInfo is the toolbox's FileInfo.
type fileInfo struct {
	Name        string    `json:"name"`
	Size        int64     `json:"size"`
	Mode        string    `json:"mode"`
	ModTime     string    `json:"modTime"`
	ModifiedAt  time.Time `json:"modifiedAt"`
	IsDir       bool      `json:"isDir"`
	Owner       string    `json:"owner"`
	Group       string    `json:"group"`
	Permissions string    `json:"permissions"`
}

func toFileInfo(fi fakeengine.FileInfo) fileInfo {
	return fileInfo{
		Name: fi.Name, Size: fi.Size, Mode: fi.Mode.String(), ModTime: fi.ModTime.String(),
		ModifiedAt: fi.ModTime, IsDir: fi.Type == fakeengine.FileDir, Permissions: fmt.Sprintf("%04o", fi.Mode.Perm()),
		Owner: strconv.FormatUint(uint64(fi.Sys.Uid), 10), Group: strconv.FormatUint(uint64(fi.Sys.Gid), 10),
	}
}

// The daemon's file calls follow a final symlink (it stats with os.Stat,
// and its listings leave out a link whose target is missing).
const follow = true

func (s *Server) fileRoutes(mux *http.ServeMux, p string) {
	mux.HandleFunc("GET "+p+"/files", s.withPath(s.listFiles))
	mux.HandleFunc("DELETE "+p+"/files", s.withPath(s.deleteFile))
	mux.HandleFunc("POST "+p+"/files/upload", s.withPath(s.upload))
	mux.HandleFunc("POST "+p+"/files/bulk-upload", s.withStarted(s.bulkUpload))
	mux.HandleFunc("POST "+p+"/files/bulk-download", s.withStarted(s.bulkDownload))
	mux.HandleFunc("GET "+p+"/files/download", s.withPath(s.download))
	mux.HandleFunc("GET "+p+"/files/info", s.withPath(func(w http.ResponseWriter, r *http.Request, eb *fakeengine.Sandbox, p string) {
		fi, err := eb.Stat(p, follow)
		if err != nil {
			fileError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, toFileInfo(fi))
	}))
	mux.HandleFunc("POST "+p+"/files/folder", s.withPath(func(w http.ResponseWriter, r *http.Request, eb *fakeengine.Sandbox, p string) {
		perm, err := parseMode(r.URL.Query().Get("mode"), 0o755)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		if err := eb.Mkdir(p, perm, true); err != nil {
			fileError(w, err)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	mux.HandleFunc("POST "+p+"/files/permissions", s.withPath(func(w http.ResponseWriter, r *http.Request, eb *fakeengine.Sandbox, p string) {
		if _, err := eb.Stat(p, follow); err != nil {
			fileError(w, err)
			return
		}
		if m := r.URL.Query().Get("mode"); m != "" {
			perm, err := parseMode(m, 0)
			if err != nil {
				writeError(w, http.StatusBadRequest, err.Error())
				return
			}
			if err := eb.Chmod(p, perm); err != nil {
				writeError(w, http.StatusBadRequest, "failed to change mode: "+err.Error())
				return
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
}

// withPath maps the query's path into the sandbox for h. Only listing may
// leave it out (the working directory).
func (s *Server) withPath(h func(http.ResponseWriter, *http.Request, *fakeengine.Sandbox, string)) http.HandlerFunc {
	return s.withStarted(func(w http.ResponseWriter, r *http.Request, sb *sandbox) {
		q := r.URL.Query().Get("path")
		if q == "" && !(r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/files")) {
			writeError(w, http.StatusBadRequest, "path is required")
			return
		}
		h(w, r, sb.eb, sandboxPath(q))
	})
}

// sandboxPath makes a toolbox path absolute: a relative one is relative to
// the working directory, /root.
func sandboxPath(q string) string {
	if !path.IsAbs(q) {
		q = "/root/" + q
	}
	return path.Clean(q)
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request, eb *fakeengine.Sandbox, p string) {
	fis, err := eb.List(p, follow)
	if err != nil {
		fileError(w, err)
		return
	}
	out := []fileInfo{}
	for _, fi := range fis {
		out = append(out, toFileInfo(fi))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request, eb *fakeengine.Sandbox, p string) {
	fi, err := eb.Stat(p, follow)
	if err != nil {
		fileError(w, err)
		return
	}
	recursive := r.URL.Query().Get("recursive") == "true"
	if fi.Type == fakeengine.FileDir && !recursive {
		writeError(w, http.StatusBadRequest, "cannot delete directory without recursive flag")
		return
	}
	if err := eb.Remove(p, recursive); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request, eb *fakeengine.Sandbox, p string) {
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	for {
		part, err := mr.NextPart()
		if err != nil {
			writeError(w, http.StatusBadRequest, "http: no such file")
			return
		}
		if part.FormName() != "file" {
			continue
		}
		// As gin's SaveUploadedFile: parents made, the file truncated.
		if _, err := eb.WriteFile(p, part, 0); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		w.WriteHeader(http.StatusOK)
		return
	}
}

func (s *Server) download(w http.ResponseWriter, r *http.Request, eb *fakeengine.Sandbox, p string) {
	f, fi, err := eb.Open(p)
	switch {
	case errors.Is(err, syscall.EISDIR):
		writeError(w, http.StatusBadRequest, "path must be a file")
		return
	case err != nil:
		fileError(w, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size, 10))
	_, _ = io.Copy(w, f)
}

// fileError answers as the daemon does: 404 missing, 403 permission, 400
// anything else.
func fileError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, fs.ErrPermission):
		writeError(w, http.StatusForbidden, err.Error())
	default:
		writeError(w, http.StatusBadRequest, err.Error())
	}
}

func parseMode(s string, def os.FileMode) (os.FileMode, error) {
	if s == "" {
		return def, nil
	}
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return 0, errors.New("invalid mode format")
	}
	return os.FileMode(m), nil
}

// ReadFile reads a file of a sandbox's file system directly, for tests
// that look at a sandbox from outside its API.
func (s *Server) ReadFile(idOrName, p string) ([]byte, error) {
	s.mu.Lock()
	sb := s.find(idOrName)
	s.mu.Unlock()
	if sb == nil {
		return nil, fs.ErrNotExist
	}
	return sb.eb.ReadFile(sandboxPath(p))
}
