package dataplane

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/envd/envdproto"
	"github.com/berth-sh/berth/sandbox"
)

func TestResolvePath(t *testing.T) {
	for raw, want := range map[string]string{
		"/a/b":       "/a/b",
		"/a//b/./c/": "/a/b/c",
		"rel/x":      "/home/u/rel/x",
		".":          "/home/u",
		"/":          "/",
		"/a..b/c..":  "/a..b/c..",
	} {
		if got, err := ResolvePath(raw, "/home/u"); err != nil || got != want {
			t.Errorf("ResolvePath(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
	for _, raw := range []string{"", "..", "../etc", "/a/../../etc/shadow", "/a/..", "a/\x00b"} {
		if _, err := ResolvePath(raw, "/home/u"); !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("ResolvePath(%q): %v, want InvalidArgument", raw, err)
		}
	}
}

func TestEntryOf(t *testing.T) {
	mt := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	e := entryOf(sandbox.FileInfo{Name: "d", Path: "/x/d", Type: sandbox.FileDir, Mode: 0o755, ModTime: mt})
	if e.Type != envdproto.FileTypeDirectory || e.Mode != 0o40755 || e.Permissions != "drwxr-xr-x" || !e.ModifiedTime.Equal(mt) {
		t.Fatalf("dir entry: %+v", e)
	}
	e = entryOf(sandbox.FileInfo{Name: "l", Path: "/l", Type: sandbox.FileSymlink, Mode: 0o777, Target: "/t"})
	if e.Type != envdproto.FileTypeSymlink || e.SymlinkTarget == nil || *e.SymlinkTarget != "/t" || e.Mode != 0o120777 {
		t.Fatalf("symlink entry: %+v", e)
	}
	b, _ := json.Marshal(entryOf(sandbox.FileInfo{Name: "f", Path: "/f", Type: sandbox.FileRegular, Size: 1 << 40, Mode: 0o644}))
	if !strings.Contains(string(b), `"size":"1099511627776"`) || !strings.Contains(string(b), `"type":"FILE_TYPE_FILE"`) {
		t.Fatalf("file entry JSON: %s", b)
	}
}

func TestWriteRPCError(t *testing.T) {
	// Unary: the code's HTTP status and a JSON body.
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/filesystem.Filesystem/Stat", nil)
	r.Header.Set("Content-Type", "application/json")
	WriteRPCError(w, r, connect.CodeNotFound, "gone")
	if w.Code != http.StatusNotFound || strings.TrimSpace(w.Body.String()) != `{"code":"not_found","message":"gone"}` {
		t.Fatalf("unary: %d %s", w.Code, w.Body)
	}
	// Streaming: 200 and one end-of-stream envelope with the error.
	w = httptest.NewRecorder()
	r = httptest.NewRequest("POST", "/process.Process/Start", nil)
	r.Header.Set("Content-Type", "application/connect+json")
	WriteRPCError(w, r, connect.CodeUnauthenticated, "no")
	body := w.Body.Bytes()
	if w.Code != 200 || len(body) < 5 || body[0] != 0x02 || int(binary.BigEndian.Uint32(body[1:5])) != len(body)-5 {
		t.Fatalf("stream: %d %q", w.Code, body)
	}
	if string(body[5:]) != `{"error":{"code":"unauthenticated","message":"no"}}` {
		t.Fatalf("end-stream message %s", body[5:])
	}
}

func TestStatusOf(t *testing.T) {
	for c, want := range map[sandbox.Class]int{
		sandbox.NotFound: 404, sandbox.InvalidArgument: 400, sandbox.ResourceExhausted: 507,
		sandbox.NotSupported: 501, sandbox.Unknown: 500,
	} {
		if got := StatusOf(sandbox.Errorf(c, "x")); got != want {
			t.Errorf("%v: %d, want %d", c, got, want)
		}
	}
	if got := StatusOf(&http.MaxBytesError{Limit: 1}); got != 413 {
		t.Errorf("MaxBytesError: %d", got)
	}
}
