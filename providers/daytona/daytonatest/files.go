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

func toFileInfo(fi fs.FileInfo) fileInfo {
	out := fileInfo{
		Name: fi.Name(), Size: fi.Size(), Mode: fi.Mode().String(), ModTime: fi.ModTime().String(),
		ModifiedAt: fi.ModTime(), IsDir: fi.IsDir(), Permissions: fmt.Sprintf("%04o", fi.Mode().Perm()),
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		out.Owner, out.Group = strconv.FormatUint(uint64(st.Uid), 10), strconv.FormatUint(uint64(st.Gid), 10)
	}
	return out
}

func (s *Server) fileRoutes(mux *http.ServeMux, p string) {
	mux.HandleFunc("GET "+p+"/files", s.withRoot(s.listFiles))
	mux.HandleFunc("DELETE "+p+"/files", s.withRoot(s.deleteFile))
	mux.HandleFunc("POST "+p+"/files/upload", s.withRoot(s.upload))
	mux.HandleFunc("POST "+p+"/files/bulk-upload", s.withStarted(s.bulkUpload))
	mux.HandleFunc("POST "+p+"/files/bulk-download", s.withStarted(s.bulkDownload))
	mux.HandleFunc("GET "+p+"/files/download", s.withRoot(s.download))
	mux.HandleFunc("GET "+p+"/files/info", s.withRoot(func(w http.ResponseWriter, r *http.Request, root *os.Root, name string) {
		fi, err := root.Stat(name)
		if err != nil {
			fileError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, toFileInfo(fi))
	}))
	mux.HandleFunc("POST "+p+"/files/folder", s.withRoot(func(w http.ResponseWriter, r *http.Request, root *os.Root, name string) {
		perm, err := parseMode(r.URL.Query().Get("mode"), 0o755)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		if err := root.MkdirAll(name, perm); err != nil {
			fileError(w, err)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	mux.HandleFunc("POST "+p+"/files/permissions", s.withRoot(func(w http.ResponseWriter, r *http.Request, root *os.Root, name string) {
		if _, err := root.Stat(name); err != nil {
			fileError(w, err)
			return
		}
		if m := r.URL.Query().Get("mode"); m != "" {
			perm, err := parseMode(m, 0)
			if err != nil {
				writeError(w, http.StatusBadRequest, err.Error())
				return
			}
			if err := root.Chmod(name, perm); err != nil {
				writeError(w, http.StatusBadRequest, "failed to change mode: "+err.Error())
				return
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
}

// withRoot opens the sandbox's file system as an os.Root, so that no path
// or symlink inside it reaches the host, and maps the query's path into it.
// Only listing may leave the path out (the working directory).
func (s *Server) withRoot(h func(http.ResponseWriter, *http.Request, *os.Root, string)) http.HandlerFunc {
	return s.withStarted(func(w http.ResponseWriter, r *http.Request, sb *sandbox) {
		q := r.URL.Query().Get("path")
		if q == "" && !(r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/files")) {
			writeError(w, http.StatusBadRequest, "path is required")
			return
		}
		root, ok := openRoot(w, sb)
		if !ok {
			return
		}
		defer root.Close()
		h(w, r, root, rootName(q))
	})
}

// openRoot opens the sandbox's file system as an os.Root, so that no path
// or symlink inside it reaches the host; on failure it has answered.
func openRoot(w http.ResponseWriter, sb *sandbox) (*os.Root, bool) {
	root, err := os.OpenRoot(sb.root())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return nil, false
	}
	return root, true
}

// rootName maps a sandbox path onto a name inside the sandbox's os.Root;
// a relative path is relative to the working directory, /root.
func rootName(q string) string {
	if q == "" {
		q = "/root"
	}
	if !path.IsAbs(q) {
		q = "/root/" + q
	}
	name := path.Clean(q)[1:]
	if name == "" {
		name = "."
	}
	return name
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request, root *os.Root, name string) {
	dir, err := root.Open(name)
	if err != nil {
		fileError(w, err)
		return
	}
	defer dir.Close()
	entries, err := dir.ReadDir(-1)
	if err != nil {
		fileError(w, err)
		return
	}
	out := []fileInfo{}
	for _, e := range entries {
		fi, err := root.Stat(path.Join(name, e.Name()))
		if err != nil {
			continue // as the daemon does: entries it cannot stat are left out
		}
		out = append(out, toFileInfo(fi))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request, root *os.Root, name string) {
	fi, err := root.Stat(name)
	if err != nil {
		fileError(w, err)
		return
	}
	if fi.IsDir() && r.URL.Query().Get("recursive") != "true" {
		writeError(w, http.StatusBadRequest, "cannot delete directory without recursive flag")
		return
	}
	if fi.IsDir() {
		err = root.RemoveAll(name)
	} else {
		err = root.Remove(name)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request, root *os.Root, name string) {
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
		if err := root.MkdirAll(path.Dir(name), 0o750); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		f, err := root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o666)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		_, err = io.Copy(f, part)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		w.WriteHeader(http.StatusOK)
		return
	}
}

func (s *Server) download(w http.ResponseWriter, r *http.Request, root *os.Root, name string) {
	fi, err := root.Stat(name)
	if err != nil {
		fileError(w, err)
		return
	}
	if fi.IsDir() {
		writeError(w, http.StatusBadRequest, "path must be a file")
		return
	}
	f, err := root.Open(name)
	if err != nil {
		fileError(w, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
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
	var dir string
	if sb != nil {
		dir = sb.root()
	}
	s.mu.Unlock()
	if sb == nil {
		return nil, fs.ErrNotExist
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return root.ReadFile(rootName(p))
}
