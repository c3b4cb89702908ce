package envd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"

	"github.com/berth-sh/berth/envd/envdproto"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// filesURL is /files?path=...&username=... plus extra query pairs.
func (c *Client) filesURL(path string, extra ...string) string {
	q := url.Values{"path": {path}}
	if c.opts.user != "" {
		q.Set("username", c.opts.user)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return c.base + "/files?" + q.Encode()
}

func (c *Client) do(ctx context.Context, op string, req *http.Request) (*http.Response, error) {
	if c.opts.token != "" {
		req.Header.Set(AccessTokenHeader, c.opts.token)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("envd %s: %w", op, context.Cause(ctx))
		}
		return nil, errdefs.Errorf(errdefs.Unavailable, "envd %s: %w", op, err)
	}
	if res.StatusCode/100 == 2 {
		return res, nil
	}
	defer res.Body.Close()
	var he envdproto.HTTPError
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	msg := string(body)
	if json.Unmarshal(body, &he) == nil && he.Message != "" {
		msg = he.Message
	}
	return nil, errdefs.HTTPError(res.StatusCode, res.Header, fmt.Errorf("envd %s: %s: %s", op, res.Status, msg))
}

// WriteFile creates or replaces the file at path with r's bytes, creating
// parent directories. mode is sent as berth's ?mode= extension, which
// upstream envd ignores (files there get its default mode).
func (c *Client) WriteFile(ctx context.Context, path string, r io.Reader, mode uint32) error {
	if r == nil {
		r = http.NoBody
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.filesURL(path, "mode", strconv.FormatUint(uint64(mode&0o7777), 8)), r)
	if err != nil {
		return errdefs.Errorf(errdefs.InvalidArgument, "envd write file: %w", err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	res, err := c.do(ctx, "write file", req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	var written []envdproto.FileUpload
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&written); err != nil || len(written) == 0 {
		return errdefs.Errorf(errdefs.Unavailable, "envd write file %s: unreadable answer: %v", path, err)
	}
	return nil
}

// ReadFile streams the file at path. Missing is NotFound; a directory is
// InvalidArgument. A connection lost mid-body reads as Unavailable.
func (c *Client) ReadFile(ctx context.Context, path string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.filesURL(path), nil)
	if err != nil {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "envd read file: %w", err)
	}
	res, err := c.do(ctx, "read file", req)
	if err != nil {
		return nil, err
	}
	return &bodyReader{rc: res.Body}, nil
}

// bodyReader classes a failed read of a download.
type bodyReader struct{ rc io.ReadCloser }

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil && err != io.EOF && !errors.Is(err, context.Canceled) {
		err = errdefs.Classify(errdefs.Unavailable, err)
	}
	return n, err
}

func (b *bodyReader) Close() error { return b.rc.Close() }

// Stat describes path without following a final symlink.
func (c *Client) Stat(ctx context.Context, path string) (driver.FileInfo, error) {
	res, err := c.stat.CallUnary(ctx, request(c, &envdproto.StatRequest{Path: path}, ""))
	if err != nil {
		return driver.FileInfo{}, classify("stat", err)
	}
	if res.Msg.Entry == nil {
		return driver.FileInfo{}, errdefs.Errorf(errdefs.Unavailable, "envd stat %s: answer without an entry", path)
	}
	return FileInfo(*res.Msg.Entry), nil
}

// ListDir lists a directory's entries, sorted by name.
func (c *Client) ListDir(ctx context.Context, path string) ([]driver.FileInfo, error) {
	res, err := c.listDir.CallUnary(ctx, request(c, &envdproto.ListDirRequest{Path: path, Depth: 1}, ""))
	if err != nil {
		return nil, classify("list dir", err)
	}
	out := make([]driver.FileInfo, 0, len(res.Msg.Entries))
	for _, e := range res.Msg.Entries {
		out = append(out, FileInfo(e))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// MakeDir creates a directory and its parents; an existing one is
// AlreadyExists.
func (c *Client) MakeDir(ctx context.Context, path string) error {
	_, err := c.makeDir.CallUnary(ctx, request(c, &envdproto.MakeDirRequest{Path: path}, ""))
	return classify("make dir", err)
}

// Move renames src to dst, creating dst's parents.
func (c *Client) Move(ctx context.Context, src, dst string) error {
	_, err := c.move.CallUnary(ctx, request(c, &envdproto.MoveRequest{Source: src, Destination: dst}, ""))
	return classify("move", err)
}

// Remove deletes a file or a directory tree; missing is NotFound.
func (c *Client) Remove(ctx context.Context, path string) error {
	_, err := c.remove.CallUnary(ctx, request(c, &envdproto.RemoveRequest{Path: path}, ""))
	return classify("remove", err)
}

// Health reports whether the server answers GET /health.
func (c *Client) Health(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/health", nil)
	if err != nil {
		return errdefs.Errorf(errdefs.InvalidArgument, "envd health: %w", err)
	}
	res, err := c.do(ctx, "health", req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	return res.Body.Close()
}

// FileInfo converts an envd entry to berth's FileInfo.
func FileInfo(e envdproto.EntryInfo) driver.FileInfo {
	fi := driver.FileInfo{
		Name:    e.Name,
		Path:    e.Path,
		Size:    int64(e.Size),
		Mode:    e.Mode & 0o7777,
		ModTime: e.ModifiedTime,
	}
	switch e.Type {
	case envdproto.FileTypeFile:
		fi.Type = driver.FileRegular
	case envdproto.FileTypeDirectory:
		fi.Type = driver.FileDir
	case envdproto.FileTypeSymlink:
		fi.Type = driver.FileSymlink
	default:
		fi.Type = driver.FileOther
	}
	if e.SymlinkTarget != nil {
		fi.Target = *e.SymlinkTarget
	}
	return fi
}
