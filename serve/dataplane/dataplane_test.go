package dataplane

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

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
