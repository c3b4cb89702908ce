package envd

// These tests speak the wire by hand (net/http, no connect-go) so that the
// format in shared/facts/e2b-protocol.md is pinned independently of the
// library that implements it.

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type frame struct {
	flag byte
	body map[string]any
}

func envelope(t *testing.T, msg string) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteByte(0)
	_ = binary.Write(&b, binary.BigEndian, uint32(len(msg)))
	b.WriteString(msg)
	return b.Bytes()
}

// readFrame reads one envelope: flag byte, 4-byte big-endian length, JSON.
func readFrame(t *testing.T, r io.Reader) (frame, bool) {
	t.Helper()
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if err == io.EOF {
			return frame{}, false
		}
		t.Fatalf("frame header: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[1:]))
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatalf("frame body: %v", err)
	}
	f := frame{flag: hdr[0]}
	if err := json.Unmarshal(body, &f.body); err != nil {
		t.Fatalf("frame %q is not JSON: %v", body, err)
	}
	return f, true
}

func postStream(t *testing.T, e *env, path, msg string, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, e.url+path, bytes.NewReader(envelope(t, msg)))
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Connect-Protocol-Version", "1")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := e.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/connect+json" {
		t.Fatalf("stream answer %s %q", res.Status, res.Header.Get("Content-Type"))
	}
	return res
}

func event(f frame) (kind string, v map[string]any) {
	ev, _ := f.body["event"].(map[string]any)
	for k, x := range ev {
		m, _ := x.(map[string]any)
		return k, m
	}
	return "", nil
}

func TestWireStartStream(t *testing.T) {
	e := tcpEnv(t, ServerOptions{})
	// Unknown fields are ignored; stdin omitted means true (old SDKs).
	res := postStream(t, e, "/process.Process/Start",
		`{"process":{"cmd":"/bin/sh","args":["-c","echo hi; echo oops >&2; exit 3"],"envs":{}},"futureField":{"x":1}}`, nil)
	var kinds []string
	var stdout, stderr string
	var end map[string]any
	var trailer *frame
	for {
		f, ok := readFrame(t, res.Body)
		if !ok {
			break
		}
		if f.flag == 0x02 {
			trailer = &f
			continue
		}
		if f.flag != 0 {
			t.Fatalf("frame flag %#x", f.flag)
		}
		k, v := event(f)
		kinds = append(kinds, k)
		switch k {
		case "start":
			if pid, ok := v["pid"].(float64); !ok || pid <= 0 {
				t.Errorf("start event %v has no pid number", v)
			}
		case "data":
			for stream, b64 := range v {
				raw, err := base64.StdEncoding.DecodeString(b64.(string))
				if err != nil {
					t.Fatalf("data is not base64: %v", err)
				}
				if stream == "stdout" {
					stdout += string(raw)
				} else {
					stderr += string(raw)
				}
			}
		case "end":
			end = v
		}
	}
	if len(kinds) < 2 || kinds[0] != "start" || kinds[len(kinds)-1] != "end" {
		t.Fatalf("event order %v: want start first and end last", kinds)
	}
	if stdout != "hi\n" || stderr != "oops\n" {
		t.Errorf("stdout %q stderr %q", stdout, stderr)
	}
	if end["exitCode"] != float64(3) || end["exited"] != true || end["status"] != "exit status 3" {
		t.Errorf("end event %v", end)
	}
	if trailer == nil || len(trailer.body) != 0 {
		t.Fatalf("end-of-stream trailer %+v, want flag 0x02 with {}", trailer)
	}
}

func TestWireStreamError(t *testing.T) {
	e := tcpEnv(t, ServerOptions{})
	res := postStream(t, e, "/process.Process/Start", `{"process":{"cmd":"no-such-program-berth"}}`, nil)
	f, ok := readFrame(t, res.Body)
	if !ok || f.flag != 0x02 {
		t.Fatalf("want only the trailer, got %+v", f)
	}
	errObj, _ := f.body["error"].(map[string]any)
	if errObj["code"] != "not_found" || !strings.Contains(errObj["message"].(string), "no-such-program-berth") {
		t.Fatalf("trailer error %v", f.body)
	}
}

func TestWireKeepalive(t *testing.T) {
	e := tcpEnv(t, ServerOptions{})
	res := postStream(t, e, "/process.Process/Start",
		`{"process":{"cmd":"sleep","args":["0.4"]},"stdin":false}`, map[string]string{"Keepalive-Ping-Interval": "0.05"})
	var kinds []string
	for {
		f, ok := readFrame(t, res.Body)
		if !ok {
			break
		}
		if f.flag == 0 {
			k, _ := event(f)
			kinds = append(kinds, k)
		}
	}
	n := strings.Count(strings.Join(kinds, " "), "keepalive")
	if n == 0 || kinds[0] != "start" || kinds[len(kinds)-1] != "end" {
		t.Fatalf("events %v: want start, keepalives while idle, end", kinds)
	}
}

func postJSON(t *testing.T, e *env, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, e.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	res, err := e.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s answered %s %q: not JSON", path, res.Status, raw)
	}
	return res.StatusCode, out
}

func TestWireUnary(t *testing.T) {
	e := tcpEnv(t, ServerOptions{})
	dir := t.TempDir()
	p := filepath.Join(dir, "five")
	if err := os.WriteFile(p, []byte("12345"), 0o640); err != nil {
		t.Fatal(err)
	}
	status, body := postJSON(t, e, "/filesystem.Filesystem/Stat", `{"path":"`+p+`","unknown":true}`)
	entry, _ := body["entry"].(map[string]any)
	if status != 200 || entry["size"] != "5" || entry["type"] != "FILE_TYPE_FILE" || entry["name"] != "five" ||
		entry["mode"] != float64(0o640) || entry["permissions"] != "-rw-r-----" {
		t.Fatalf("stat: %d %v (size must be the int64 string \"5\")", status, body)
	}
	if ts, _ := entry["modifiedTime"].(string); !strings.HasSuffix(ts, "Z") {
		t.Errorf("modifiedTime %q is not RFC 3339 UTC", entry["modifiedTime"])
	}

	status, body = postJSON(t, e, "/filesystem.Filesystem/Stat", `{"path":"`+dir+`/missing"}`)
	if status != 404 || body["code"] != "not_found" || body["message"] == "" {
		t.Fatalf("stat of a missing path: %d %v", status, body)
	}
	status, body = postJSON(t, e, "/filesystem.Filesystem/MakeDir", `{"path":"`+dir+`"}`)
	if status != 409 || body["code"] != "already_exists" {
		t.Fatalf("make dir over a dir: %d %v", status, body)
	}
	status, body = postJSON(t, e, "/filesystem.Filesystem/ListDir", `{"path":"`+dir+`","depth":1}`)
	if ents, _ := body["entries"].([]any); status != 200 || len(ents) != 1 {
		t.Fatalf("list dir: %d %v", status, body)
	}
	// Enums are accepted by number too; an unknown pid is not_found.
	status, body = postJSON(t, e, "/process.Process/SendSignal", `{"process":{"pid":999999},"signal":9}`)
	if status != 404 || body["code"] != "not_found" {
		t.Fatalf("signal to an unknown pid: %d %v", status, body)
	}
	status, body = postJSON(t, e, "/process.Process/List", `{}`)
	if _, ok := body["processes"].([]any); status != 200 || !ok {
		t.Fatalf("list: %d %v", status, body)
	}
}

func TestWireFilesAndHealth(t *testing.T) {
	const token = "tok"
	e := tcpEnv(t, ServerOptions{AccessToken: token})
	dir := t.TempDir()
	dest := filepath.Join(dir, "sub", "up.txt")

	var mp bytes.Buffer
	w := multipart.NewWriter(&mp)
	fw, _ := w.CreateFormFile("file", "ignored-name.txt")
	_, _ = fw.Write([]byte("multipart body"))
	_ = w.Close()
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, e.url+"/files?path="+dest, &mp)
	req.Header.Set("Content-Type", w.FormDataContentType())
	req.Header.Set("X-Access-Token", token)
	res, err := e.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var written []map[string]string
	_ = json.NewDecoder(res.Body).Decode(&written)
	res.Body.Close()
	if res.StatusCode != 200 || len(written) != 1 || written[0]["path"] != dest || written[0]["name"] != "up.txt" || written[0]["type"] != "file" {
		t.Fatalf("upload: %s %v", res.Status, written)
	}

	get := func(rawQuery string, hdr map[string]string) (*http.Response, []byte) {
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodGet, e.url+"/files?"+rawQuery, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := e.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, b
	}
	auth := map[string]string{"X-Access-Token": token}
	if res, b := get("path="+dest, auth); res.StatusCode != 200 || string(b) != "multipart body" {
		t.Fatalf("download: %s %q", res.Status, b)
	}
	if res, b := get("path="+dest, map[string]string{"X-Access-Token": token, "Range": "bytes=10-"}); res.StatusCode != 206 || string(b) != "body" {
		t.Fatalf("range download: %s %q", res.Status, b)
	}
	checkErr := func(name string, res *http.Response, b []byte, status int) {
		var he map[string]any
		if res.StatusCode != status || json.Unmarshal(b, &he) != nil || he["code"] != float64(status) || he["message"] == "" {
			t.Errorf("%s: %s %q, want %d with a JSON {code,message}", name, res.Status, b, status)
		}
	}
	res2, b := get("path="+dir+"/missing", auth)
	checkErr("missing file", res2, b, 404)
	res2, b = get("path="+dir, auth)
	checkErr("directory", res2, b, 400)
	res2, b = get("path="+dest, nil)
	checkErr("no token", res2, b, 401)
	res2, b = get("path="+dest, map[string]string{"X-Access-Token": "wrong"})
	checkErr("wrong token", res2, b, 401)

	// A signed URL stands in for the token, for its path and operation only.
	sig := FileSignature(dest, "read", "", token, "")
	if res, b := get("path="+dest+"&signature="+url.QueryEscape(sig), nil); res.StatusCode != 200 || string(b) != "multipart body" {
		t.Fatalf("signed download: %s %q", res.Status, b)
	}
	res2, b = get("path="+dir+"/other&signature="+url.QueryEscape(sig), nil)
	checkErr("signature for another path", res2, b, 401)

	// RPCs refuse a wrong token with the Connect error shape.
	req, _ = http.NewRequestWithContext(ctxT(t), http.MethodPost, e.url+"/filesystem.Filesystem/Stat", strings.NewReader(`{"path":"/"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Access-Token", "wrong")
	res, err = e.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var ce map[string]any
	_ = json.NewDecoder(res.Body).Decode(&ce)
	res.Body.Close()
	if res.StatusCode != 401 || ce["code"] != "unauthenticated" {
		t.Fatalf("rpc with a wrong token: %s %v", res.Status, ce)
	}

	res, err = e.hc.Get(e.url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 204 {
		t.Fatalf("health: %s", res.Status)
	}
}
