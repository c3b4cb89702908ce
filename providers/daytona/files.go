package daytona

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth/providers/internal/rest"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// fileInfoDTO is the toolbox's FileInfo.
type fileInfoDTO struct {
	Name        string `json:"name"`
	Size        int64  `json:"size"`
	Mode        string `json:"mode"` // Go's FileMode.String(): "-rw-r--r--"
	ModifiedAt  string `json:"modifiedAt"`
	IsDir       bool   `json:"isDir"`
	Permissions string `json:"permissions"` // "0644"
}

// replayLimit is the size up to which an upload is held in memory, so that
// a throttled upload can be sent again.
const replayLimit = 8 << 20

// WriteFile uploads r to p through the toolbox's bulk upload, the SDKs'
// upload (one multipart part names the destination, the next carries the
// bytes; the toolbox creates parent directories), and then sets the
// permission bits, which the upload does not carry.
func (s *Sandbox) WriteFile(ctx context.Context, p string, r io.Reader, mode uint32) error {
	u, err := s.tb(ctx, "/files/bulk-upload")
	if err != nil {
		return err
	}
	head, err := io.ReadAll(io.LimitReader(r, replayLimit+1))
	if err != nil {
		return fmt.Errorf("daytona: reading the data for %s: %w", p, err)
	}
	if len(head) <= replayLimit {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		if err := writeUploadParts(mw, p, bytes.NewReader(head)); err != nil {
			return err
		}
		body := buf.Bytes()
		err = s.p.c.do(ctx, rest.Call{Method: http.MethodPost, URL: u, ContentType: mw.FormDataContentType(),
			Body: func() (io.Reader, error) { return bytes.NewReader(body), nil }}, nil)
	} else {
		err = s.uploadStream(ctx, u, p, io.MultiReader(bytes.NewReader(head), r))
	}
	if err != nil {
		return err
	}
	pu, err := s.tb(ctx, "/files/permissions")
	if err != nil {
		return err
	}
	return s.p.c.do(ctx, rest.Call{Method: http.MethodPost, URL: pu, Query: url.Values{"path": {p}, "mode": {fmt.Sprintf("%04o", mode&0o7777)}}}, nil)
}

// writeUploadParts writes the parts of a one-file bulk upload and closes
// the form.
func writeUploadParts(mw *multipart.Writer, p string, r io.Reader) error {
	if err := mw.WriteField("files[0].path", p); err != nil {
		return err
	}
	fw, err := mw.CreateFormFile("files[0].file", p)
	if err == nil {
		_, err = io.Copy(fw, r)
	}
	if err == nil {
		err = mw.Close()
	}
	return err
}

// uploadStream sends a large file as a streamed multipart body.
func (s *Sandbox) uploadStream(ctx context.Context, u, p string, r io.Reader) error {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	done := make(chan struct{})
	go func() {
		defer close(done)
		pw.CloseWithError(writeUploadParts(mw, p, r))
	}()
	err := s.p.c.do(ctx, rest.Call{Method: http.MethodPost, URL: u, ContentType: mw.FormDataContentType(), Once: true,
		Body: func() (io.Reader, error) { return pr, nil }}, nil)
	pr.CloseWithError(errors.New("upload ended"))
	<-done
	return err
}

// ReadFile streams the file at p. A directory is InvalidArgument (the
// toolbox answers 400 "path must be a file").
func (s *Sandbox) ReadFile(ctx context.Context, p string) (io.ReadCloser, error) {
	u, err := s.tb(ctx, "/files/download")
	if err != nil {
		return nil, err
	}
	resp, err := s.p.c.send(ctx, rest.Call{Method: http.MethodGet, URL: u, Query: url.Values{"path": {p}}})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Stat describes p without following a final symlink. The toolbox's file
// info follows one (the daemon stats with os.Stat, and its listings leave
// out a link whose target is missing), so a one-off command first asks
// whether p is a symlink and reads its target; only a path that is not a
// link is described by the file info call.
func (s *Sandbox) Stat(ctx context.Context, p string) (driver.FileInfo, error) {
	clean := path.Clean(p)
	target, isLink, err := s.readLink(ctx, clean)
	if err != nil {
		return driver.FileInfo{}, err
	}
	if isLink {
		return driver.FileInfo{Name: path.Base(clean), Path: clean, Type: driver.FileSymlink, Mode: 0o777,
			Size: int64(len(target)), Target: target}, nil
	}
	u, err := s.tb(ctx, "/files/info")
	if err != nil {
		return driver.FileInfo{}, err
	}
	var d fileInfoDTO
	if err := s.p.c.do(ctx, rest.Call{Method: http.MethodGet, URL: u, Query: url.Values{"path": {p}}}, &d); err != nil {
		return driver.FileInfo{}, err
	}
	return toFileInfo(path.Base(clean), clean, d), nil
}

// readLink reports whether p is a symlink and, if so, its target, with the
// sandbox's own test and readlink (POSIX sh; coreutils and busybox).
func (s *Sandbox) readLink(ctx context.Context, p string) (string, bool, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", false, errdefs.Errorf(errdefs.InvalidArgument, "daytona: the path holds a NUL byte")
	}
	u, err := s.tb(ctx, "/process/execute")
	if err != nil {
		return "", false, err
	}
	script := fmt.Sprintf(`__p=%s; if [ -L "$__p" ]; then readlink -- "$__p" || exit 4; else exit 3; fi`, quote(p))
	var out struct {
		ExitCode int    `json:"exitCode"`
		Result   string `json:"result"`
	}
	if err := s.p.c.do(ctx, rest.Call{Method: http.MethodPost, URL: u, JSON: map[string]any{"command": script, "timeout": 30}}, &out); err != nil {
		return "", false, err
	}
	switch out.ExitCode {
	case 0:
		return strings.TrimSuffix(out.Result, "\n"), true, nil
	case 3:
		return "", false, nil
	default:
		return "", false, errdefs.Errorf(errdefs.Unavailable, "daytona stat %s: telling a symlink apart failed (exit %d): %s", p, out.ExitCode, tailLines(out.Result, 5, 500))
	}
}

// ListDir lists a directory; listing a file is InvalidArgument.
func (s *Sandbox) ListDir(ctx context.Context, p string) ([]driver.FileInfo, error) {
	u, err := s.tb(ctx, "/files")
	if err != nil {
		return nil, err
	}
	var ds []fileInfoDTO
	if err := s.p.c.do(ctx, rest.Call{Method: http.MethodGet, URL: u, Query: url.Values{"path": {p}}}, &ds); err != nil {
		return nil, err
	}
	dir := path.Clean(p)
	out := make([]driver.FileInfo, 0, len(ds))
	for _, d := range ds {
		out = append(out, toFileInfo(d.Name, path.Join(dir, d.Name), d))
	}
	slices.SortFunc(out, func(a, b driver.FileInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// MakeDir creates p and its parents. The toolbox's create is MkdirAll,
// which says nothing of a directory already there, so Stat asks first.
func (s *Sandbox) MakeDir(ctx context.Context, p string) error {
	fi, err := s.Stat(ctx, p)
	switch {
	case err == nil && fi.Type == driver.FileDir:
		return errdefs.Errorf(errdefs.AlreadyExists, "daytona: directory %s exists", p)
	case err == nil:
		return errdefs.Errorf(errdefs.InvalidArgument, "daytona: %s exists and is not a directory", p)
	case !errors.Is(err, errdefs.ErrNotFound):
		return err
	}
	return s.mkdirAll(ctx, p)
}

// mkdirAll creates dir and its parents; an existing directory is fine.
func (s *Sandbox) mkdirAll(ctx context.Context, dir string) error {
	u, err := s.tb(ctx, "/files/folder")
	if err != nil {
		return err
	}
	return s.p.c.do(ctx, rest.Call{Method: http.MethodPost, URL: u, Query: url.Values{"path": {dir}, "mode": {"0755"}}}, nil)
}

// Remove deletes a file or a directory tree.
func (s *Sandbox) Remove(ctx context.Context, p string) error {
	u, err := s.tb(ctx, "/files")
	if err != nil {
		return err
	}
	return s.p.c.do(ctx, rest.Call{Method: http.MethodDelete, URL: u, Query: url.Values{"path": {p}, "recursive": {"true"}}}, nil)
}

func toFileInfo(name, p string, d fileInfoDTO) driver.FileInfo {
	fi := driver.FileInfo{Name: name, Path: p, Size: d.Size, Type: driver.FileOther}
	switch {
	case d.IsDir || strings.HasPrefix(d.Mode, "d"):
		fi.Type = driver.FileDir
	case strings.HasPrefix(d.Mode, "L"):
		fi.Type = driver.FileSymlink
	case strings.HasPrefix(d.Mode, "-"):
		fi.Type = driver.FileRegular
	}
	if perm, err := strconv.ParseUint(d.Permissions, 8, 32); err == nil {
		fi.Mode = uint32(perm) & 0o7777
	} else if len(d.Mode) >= 9 {
		fi.Mode = permFromString(d.Mode[len(d.Mode)-9:])
	}
	if t, err := time.Parse(time.RFC3339Nano, d.ModifiedAt); err == nil {
		fi.ModTime = t
	}
	return fi
}

// permFromString reads "rwxr-xr-x".
func permFromString(s string) uint32 {
	var m uint32
	for i, c := range s {
		if c != '-' {
			m |= 1 << (8 - i)
		}
	}
	return m
}
