package envd

import (
	"os"
	"path/filepath"
	"testing"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/envd/envdproto"
)

// WatchDir reports what changes under a directory, in order of the
// changes (each is made after the previous event arrived), and ends with
// Unavailable when the server closes.
func TestWatchDir(t *testing.T) {
	e := unixEnv(t, ServerOptions{})
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	wc := connect.NewClient[envdproto.WatchDirRequest, envdproto.WatchDirResponse](e.hc, e.url+envdproto.ProcedureWatchDir, connect.WithCodec(envdproto.Codec{}))
	stream, err := wc.CallServerStream(ctxT(t), connect.NewRequest(&envdproto.WatchDirRequest{Path: dir, Recursive: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	next := func() *envdproto.WatchDirResponse {
		t.Helper()
		if !stream.Receive() {
			t.Fatalf("watch ended: %v", stream.Err())
		}
		return stream.Msg()
	}
	if ev := next(); ev.Start == nil {
		t.Fatalf("first event %+v, want start", ev)
	}
	f := filepath.Join(dir, "sub", "f.txt")
	steps := []struct {
		change func() error
		name   string
		typ    envdproto.EventType
	}{
		{func() error { return os.WriteFile(f, []byte("a"), 0o644) }, "sub/f.txt", envdproto.EventTypeCreate},
		{func() error { return os.WriteFile(f, []byte("longer"), 0o644) }, "sub/f.txt", envdproto.EventTypeWrite},
		{func() error { return os.Remove(f) }, "sub/f.txt", envdproto.EventTypeRemove},
	}
	for _, st := range steps {
		if err := st.change(); err != nil {
			t.Fatal(err)
		}
		ev := next()
		if ev.Filesystem == nil || ev.Filesystem.Name != st.name || ev.Filesystem.Type != st.typ {
			t.Fatalf("event %+v, want %s %s", ev.Filesystem, st.typ, st.name)
		}
	}
	_ = e.srv.Close()
	if stream.Receive() {
		t.Fatalf("event after close: %+v", stream.Msg())
	}
	if err := stream.Err(); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("watch after close: %v, want Unavailable", err)
	}
}
