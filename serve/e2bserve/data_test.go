package e2bserve

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/internal/syncbuf"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/serve/internal/core"
)

func TestDataPlaneProcesses(t *testing.T) {
	e := newEnv(t, nil, nil)
	sb := e.Create(testKey, map[string]any{"envVars": map[string]string{"FROM_CREATE": "yes"}})
	c := e.EnvdClient(sb)
	ctx := context.Background()

	run := func(cmd sandbox.Command) (int, string, string) {
		t.Helper()
		// The client writes output before Wait returns: no lock needed.
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		p, err := c.Exec(ctx, cmd)
		if err != nil {
			t.Fatalf("exec %v: %v", cmd.Args, err)
		}
		code, err := p.Wait(ctx)
		if err != nil {
			t.Fatalf("wait %v: %v", cmd.Args, err)
		}
		return code, out.String(), errb.String()
	}
	// As the SDKs run commands: bash -l -c, output apart, exit code kept.
	code, out, errs := run(sandbox.Command{Args: []string{"/bin/bash", "-l", "-c", "echo out; echo err >&2; exit 3"}})
	if code != 3 || out != "out\n" || errs != "err\n" {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, errs)
	}
	// Env from create and from the call; cwd given, and the home by default.
	code, out, _ = run(sandbox.Command{Args: []string{"sh", "-c", "echo $FROM_CREATE $FROM_CALL; pwd"}, Env: map[string]string{"FROM_CALL": "too"}, Dir: "/tmp"})
	if code != 0 || out != "yes too\n/tmp\n" {
		t.Fatalf("env and cwd: %d %q", code, out)
	}
	if _, out, _ = run(sandbox.Command{Args: []string{"pwd"}}); out != "/root\n" {
		t.Fatalf("default cwd %q, want the home /root", out)
	}
	// stdin through SendInput and CloseStdin.
	if _, out, _ = run(sandbox.Command{Args: []string{"cat"}, Stdin: strings.NewReader("piped in\n")}); out != "piped in\n" {
		t.Fatalf("stdin: %q", out)
	}
	// A background process: listed, attached from a second stream,
	// killed by pid, then unknown.
	first := &syncbuf.Buffer{}
	p, err := c.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", "echo started; sleep 30"}, Stdout: first})
	if err != nil {
		t.Fatal(err)
	}
	// Killed before it printed, the shell would print nothing.
	eventually(t, "the background process prints", func() bool { return first.String() != "" })
	procs, err := c.Processes(ctx)
	if err != nil || len(procs) != 1 || int(procs[0].PID) != p.PID() || procs[0].Config.Cmd != "sh" {
		t.Fatalf("list: %+v %v", procs, err)
	}
	att, err := c.Attach(ctx, p.PID(), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Signal(ctx, p.PID(), sandbox.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, w := range []interface {
		Wait(context.Context) (int, error)
	}{p, att} {
		if code, err := w.Wait(ctx); code != 137 || err != nil {
			t.Fatalf("killed process: exit %d %v, want 137", code, err)
		}
	}
	if first.String() != "started\n" {
		t.Fatalf("output before the kill: %q", first.String())
	}
	if err := c.Signal(ctx, p.PID(), sandbox.SIGKILL); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("signal to an ended process: %v, want NotFound", err)
	}
	if procs, _ := c.Processes(ctx); len(procs) != 0 {
		t.Fatalf("ended process still listed: %+v", procs)
	}
}

func TestDataPlaneFiles(t *testing.T) {
	e := newEnv(t, nil, nil)
	sb := e.Create(testKey, nil)
	c := e.EnvdClient(sb)
	ctx := context.Background()
	big := make([]byte, 5<<20)
	_, _ = rand.Read(big)
	if err := c.WriteFile(ctx, "/data/big.bin", bytes.NewReader(big), 0o644); err != nil {
		t.Fatal(err)
	}
	rc, err := c.ReadFile(ctx, "/data/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("5 MB round trip: %d bytes back, %v", len(got), err)
	}
	fi, err := c.Stat(ctx, "/data/big.bin")
	if err != nil || fi.Size != 5<<20 || fi.Type != sandbox.FileRegular || fi.Name != "big.bin" || fi.Mode != 0o644 {
		t.Fatalf("stat: %+v %v", fi, err)
	}
	// berth's ?mode= extension is honoured.
	if err := c.WriteFile(ctx, "/data/run.sh", strings.NewReader("#!/bin/sh\necho ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if fi, err := c.Stat(ctx, "/data/run.sh"); err != nil || fi.Mode != 0o755 {
		t.Fatalf("mode of an executable upload: %+v %v", fi, err)
	}
	if err := c.MakeDir(ctx, "/data/sub/deeper"); err != nil {
		t.Fatal(err)
	}
	if err := c.MakeDir(ctx, "/data/sub/deeper"); !errors.Is(err, sandbox.ErrAlreadyExists) {
		t.Fatalf("second makeDir: %v, want AlreadyExists", err)
	}
	if err := c.Move(ctx, "/data/big.bin", "/data/sub/moved.bin"); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListDir(ctx, "/data/sub")
	if err != nil || len(list) != 2 || list[0].Name != "deeper" || list[0].Type != sandbox.FileDir || list[1].Name != "moved.bin" || list[1].Size != 5<<20 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if _, err := c.Stat(ctx, "/data/big.bin"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("moved source: %v", err)
	}
	if err := c.Remove(ctx, "/data/sub"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadFile(ctx, "/data/sub/moved.bin"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("read after remove: %v", err)
	}
	if err := c.Remove(ctx, "/data/sub"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("remove twice: %v", err)
	}
	if err := c.Move(ctx, "/nope", "/data/x"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("move of a missing file: %v", err)
	}
}

// filesCall makes a raw /files request to the server.
func (e *testEnv) filesCall(method, query string, body io.Reader, hdr map[string]string) response {
	e.T.Helper()
	h := map[string]string{}
	for k, v := range hdr {
		h[k] = v
	}
	if h["Content-Type"] == "" && body != nil {
		h["Content-Type"] = "application/octet-stream"
	}
	return e.Call(method, "/files?"+query, "", body, h)
}

func TestFilesRouting(t *testing.T) {
	e := newEnv(t, nil, nil)
	sb := e.Create(testKey, nil)
	tok := map[string]string{envd.AccessTokenHeader: sb.EnvdAccessToken}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	// SDKs 2.7 - 2.14.0: /files with the token alone.
	r := e.filesCall("POST", "path=/hello.txt", strings.NewReader("hi"), with(tok))
	if r.Status != 200 {
		t.Fatalf("upload by token: %d %s", r.Status, r.Body)
	}
	var up []map[string]string
	r.JSON(t, &up)
	if len(up) != 1 || up[0]["path"] != "/hello.txt" || up[0]["name"] != "hello.txt" || up[0]["type"] != "file" {
		t.Fatalf("upload answer %s", r.Body)
	}
	// The sandbox API sets plain permission bits only: setuid or no bits
	// at all are refused, not silently changed.
	for _, mode := range []string{"4755", "0", "9"} {
		if r := e.filesCall("POST", "path=/moded&mode="+mode, strings.NewReader("x"), with(tok)); r.Status != 400 {
			t.Fatalf("upload with mode %s: %d %s", mode, r.Status, r.Body)
		}
	}
	// Routed by header, and by Host <port>-<id>.<domain>.
	for _, h := range []map[string]string{
		with(tok, e2bapi.SandboxIDHeader, sb.SandboxID, e2bapi.SandboxPortHeader, e2bapi.EnvdPort),
		with(tok, "Host", e2bapi.EnvdPort+"-"+sb.SandboxID+".localhost:3000"),
	} {
		r := e.filesCall("GET", "path=/hello.txt", nil, h)
		if r.Status != 200 || string(r.Body) != "hi" {
			t.Fatalf("read routed by %v: %d %q", h, r.Status, r.Body)
		}
	}
	// Multipart, with the destination in the part's filename (relative:
	// under the home).
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	fw, _ := mw.CreateFormFile("file", "notes/a.txt")
	fmt.Fprint(fw, "multi")
	mw.Close()
	r = e.filesCall("POST", "", &mp, with(tok, "Content-Type", mw.FormDataContentType()))
	if r.Status != 200 || !strings.Contains(string(r.Body), `"/root/notes/a.txt"`) {
		t.Fatalf("multipart: %d %s", r.Status, r.Body)
	}
	if r := e.filesCall("GET", "path=notes/a.txt", nil, with(tok)); string(r.Body) != "multi" {
		t.Fatalf("relative read: %d %q", r.Status, r.Body)
	}
	if r := e.filesCall("GET", "path=/missing", nil, with(tok)); r.Status != 404 {
		t.Fatalf("missing file: %d", r.Status)
	} else {
		r.ErrorCode(t)
	}
	if r := e.filesCall("GET", "path=/tmp", nil, with(tok)); r.Status != 400 {
		t.Fatalf("directory: %d", r.Status)
	}
	// A signed URL needs no token; a wrong signature is refused.
	sig := envd.FileSignature("/hello.txt", "read", "", sb.EnvdAccessToken, "")
	id := map[string]string{e2bapi.SandboxIDHeader: sb.SandboxID}
	if r := e.filesCall("GET", "path=/hello.txt&signature="+url.QueryEscape(sig), nil, with(id)); r.Status != 200 || string(r.Body) != "hi" {
		t.Fatalf("signed read: %d %s", r.Status, r.Body)
	}
	if r := e.filesCall("GET", "path=/hello.txt&signature=v1_wrong", nil, with(id)); r.Status != 401 {
		t.Fatalf("bad signature: %d", r.Status)
	}
	exp := fmt.Sprint(time.Now().Add(-time.Minute).Unix())
	old := envd.FileSignature("/hello.txt", "read", "", sb.EnvdAccessToken, exp)
	if r := e.filesCall("GET", "path=/hello.txt&signature="+url.QueryEscape(old)+"&signature_expiration="+exp, nil, with(id)); r.Status != 401 {
		t.Fatalf("expired signature: %d", r.Status)
	}
	// envd health needs no token; a gone sandbox is 502 (isRunning false).
	if r := e.Call("GET", "/health", "", nil, with(id)); r.Status != 204 {
		t.Fatalf("envd health: %d", r.Status)
	}
	if r := e.Call("GET", "/health", "", nil, map[string]string{e2bapi.SandboxIDHeader: "gone0000000000000000"}); r.Status != 502 {
		t.Fatalf("health of an unknown sandbox: %d", r.Status)
	}
	if r := e.filesCall("GET", "path=/hello.txt", nil, with(tok, "Host", "8080-"+sb.SandboxID+".localhost")); r.Status != 502 {
		t.Fatalf("a port other than envd's: %d", r.Status)
	}
}

// rpc makes a raw unary Connect call and returns status and body.
func (e *testEnv) rpc(path string, msg any, hdr map[string]string) response {
	h := map[string]string{"Connect-Protocol-Version": "1"}
	for k, v := range hdr {
		h[k] = v
	}
	return e.Call("POST", path, "", msg, h)
}

// streamRPC makes a raw server-streaming Connect call and returns its
// envelopes' (flag, JSON) pairs.
func (e *testEnv) streamRPC(path string, msg any, hdr map[string]string) (int, [][2]string) {
	e.T.Helper()
	b, _ := json.Marshal(msg)
	frame := append([]byte{0, 0, 0, 0, 0}, b...)
	binary.BigEndian.PutUint32(frame[1:5], uint32(len(b)))
	req, _ := http.NewRequest("POST", e.URL+path, bytes.NewReader(frame))
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Connect-Protocol-Version", "1")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var out [][2]string
	for len(body) >= 5 {
		n := binary.BigEndian.Uint32(body[1:5])
		out = append(out, [2]string{fmt.Sprint(body[0]), string(body[5 : 5+n])})
		body = body[5+n:]
	}
	return res.StatusCode, out
}

func TestDataPlaneSecurity(t *testing.T) {
	e := newEnv(t, func(o *core.Options) { o.MaxUploadBytes = 1 << 20 }, nil)
	a := e.Create(testKey, nil)
	b := e.Create(testKey, nil)
	idA := map[string]string{e2bapi.SandboxIDHeader: a.SandboxID}
	withTok := func(h map[string]string, tok string) map[string]string {
		out := map[string]string{envd.AccessTokenHeader: tok}
		for k, v := range h {
			out[k] = v
		}
		return out
	}
	// Another sandbox's token is refused on A, for files and for RPCs,
	// and so is none at all.
	for _, tok := range []string{b.EnvdAccessToken, "", a.EnvdAccessToken[:20]} {
		h := withTok(idA, tok)
		if tok == "" {
			h = map[string]string{e2bapi.SandboxIDHeader: a.SandboxID}
		}
		if r := e.filesCall("GET", "path=/etc/passwd", nil, h); r.Status != 401 {
			t.Fatalf("files with token %.8q: %d", tok, r.Status)
		}
		r := e.rpc("/filesystem.Filesystem/Stat", map[string]string{"path": "/"}, h)
		if r.Status != 401 || !strings.Contains(string(r.Body), `"unauthenticated"`) {
			t.Fatalf("unary RPC with token %.8q: %d %s", tok, r.Status, r.Body)
		}
		status, frames := e.streamRPC("/process.Process/Start", map[string]any{"process": map[string]any{"cmd": "true"}}, h)
		if status != 200 || len(frames) != 1 || frames[0][0] != "2" || !strings.Contains(frames[0][1], `"unauthenticated"`) {
			t.Fatalf("streaming RPC with token %.8q: %d %v", tok, status, frames)
		}
	}
	// The right token works.
	okH := withTok(idA, a.EnvdAccessToken)
	status, frames := e.streamRPC("/process.Process/Start", map[string]any{"process": map[string]any{"cmd": "/bin/bash", "args": []string{"-l", "-c", "echo hi"}}}, okH)
	if status != 200 || len(frames) < 3 || !strings.Contains(frames[0][1], `"start"`) || frames[len(frames)-1][0] != "2" || !strings.Contains(frames[len(frames)-2][1], `"end"`) {
		t.Fatalf("start stream: %d %v", status, frames)
	}
	// Paths that climb with .. are refused before the sandbox sees them.
	for _, p := range []string{"/../../etc/shadow", "../x", "/tmp/../../etc"} {
		if r := e.filesCall("GET", "path="+url.QueryEscape(p), nil, okH); r.Status != 400 || !strings.Contains(string(r.Body), "..") {
			t.Fatalf("read %s: %d %s", p, r.Status, r.Body)
		}
		if r := e.filesCall("POST", "path="+url.QueryEscape(p), strings.NewReader("x"), okH); r.Status != 400 {
			t.Fatalf("write %s: %d", p, r.Status)
		}
		if r := e.rpc("/filesystem.Filesystem/Stat", map[string]string{"path": p}, okH); r.Status != 400 || !strings.Contains(string(r.Body), "invalid_argument") {
			t.Fatalf("stat %s: %d %s", p, r.Status, r.Body)
		}
	}
	// Oversized uploads: 413, with a length and chunked.
	big := bytes.Repeat([]byte("x"), 1<<20+1)
	if r := e.filesCall("POST", "path=/big", bytes.NewReader(big), okH); r.Status != 413 {
		t.Fatalf("oversized upload: %d %s", r.Status, r.Body)
	}
	if r := e.filesCall("POST", "path=/big", io.MultiReader(bytes.NewReader(big[:1<<19]), bytes.NewReader(big[1<<19:])), okH); r.Status != 413 {
		t.Fatalf("oversized chunked upload: %d %s", r.Status, r.Body)
	}
	// Unknown sandbox over RPC: a Connect error, never a hang.
	r := e.rpc("/process.Process/List", map[string]any{}, map[string]string{e2bapi.SandboxIDHeader: "unknown0000000000000", envd.AccessTokenHeader: a.EnvdAccessToken})
	if r.Status != 404 || !strings.Contains(string(r.Body), "not_found") {
		t.Fatalf("RPC to an unknown sandbox: %d %s", r.Status, r.Body)
	}
	// A token that names no sandbox, with nothing else, is a gone sandbox.
	if r := e.filesCall("GET", "path=/x", nil, map[string]string{envd.AccessTokenHeader: "nosuchtoken"}); r.Status != 502 {
		t.Fatalf("unknown token: %d", r.Status)
	}
	if r := e.Call("GET", "/health", "", nil, map[string]string{envd.AccessTokenHeader: "nosuchtoken"}); r.Status != 502 {
		t.Fatalf("health by an unknown token: %d", r.Status)
	}
	if r := e.Call("GET", "/health", "", nil, map[string]string{envd.AccessTokenHeader: b.EnvdAccessToken}); r.Status != 204 {
		t.Fatalf("envd health by token: %d", r.Status)
	}
	if r := e.filesCall("GET", "path=/x", nil, map[string]string{}); r.Status != 400 {
		t.Fatalf("no sandbox named: %d", r.Status)
	}
}
