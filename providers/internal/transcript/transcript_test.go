package transcript_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/berth-sh/berth/providers/internal/transcript"
)

// The transport records method, route, status and field names, and no
// value: not the body's, not the Authorization header's.
func TestTransportRecordsShapeOnly(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"sb-secret-id","labels":{"owner":"alice"},"items":[{"name":"n1"},{"size":3}]}`)
	}))
	defer srv.Close()
	var tr transcript.Transcript
	c := &http.Client{Transport: tr.Transport(nil, func(r *http.Request) string { return "/sandbox/{id}" }, "labels")}
	req, _ := http.NewRequest("POST", srv.URL+"/sandbox/sb-secret-id", strings.NewReader(`{"name":"berth-1","env":{"TOKEN":"hunter2"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer key-hunter2")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "sb-secret-id") {
		t.Fatalf("the caller lost the body: %s", body)
	}
	es := tr.Entries()
	if len(es) != 1 {
		t.Fatalf("entries %v", es)
	}
	e := es[0]
	if e.Method != "POST" || e.Route != "/sandbox/{id}" || e.Status != "200" ||
		!slices.Equal(e.Request, []string{"env", "env.TOKEN", "name"}) ||
		!slices.Equal(e.Response, []string{"id", "items", "items[].name", "items[].size", "labels"}) {
		t.Fatalf("entry %+v", e)
	}
	path := filepath.Join(t.TempDir(), "t.txt")
	if err := tr.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	out, _ := os.ReadFile(path)
	for _, secret := range []string{"hunter2", "alice", "sb-secret-id", "berth-1"} {
		if strings.Contains(string(out), secret) {
			t.Errorf("the transcript holds the value %q:\n%s", secret, out)
		}
	}
}

// Diff finds a call only one side made, a field only one side has, and
// ignores order, repetition and what skip leaves out.
func TestDiff(t *testing.T) {
	var a, b transcript.Transcript
	a.Add(transcript.Entry{Method: "GET", Route: "/x", Status: "200", Response: []string{"id", "state"}})
	a.Add(transcript.Entry{Method: "GET", Route: "/x", Status: "200", Response: []string{"id"}})
	a.Add(transcript.Entry{Method: "POST", Route: "/y", Status: "201"})
	b.Add(transcript.Entry{Method: "POST", Route: "/y", Status: "201"})
	b.Add(transcript.Entry{Method: "GET", Route: "/x", Status: "200", Response: []string{"id", "state"}})
	b.Add(transcript.Entry{Method: "GET", Route: "/x", Status: "429"})
	skip := func(e transcript.Entry) bool { return e.Status == "429" }
	if d := transcript.Diff(&a, &b, skip); len(d) != 0 {
		t.Fatalf("equal runs differ: %v", d)
	}
	b.Add(transcript.Entry{Method: "POST", Route: "/y", Status: "200"})
	b.Add(transcript.Entry{Method: "GET", Route: "/x", Status: "200", Response: []string{"extra"}})
	d := transcript.Diff(&a, &b, skip)
	if len(d) != 2 || !strings.Contains(d[0], "response fields only in the second: extra") || !strings.Contains(d[1], "only in the second: POST /y 200") {
		t.Fatalf("diff %q", d)
	}
}

// ProtoFields names the set fields, nested and repeated ones included,
// without values.
func TestProtoFields(t *testing.T) {
	m, _ := structpb.NewStruct(map[string]any{"k": []any{"v"}})
	got := transcript.ProtoFields(m)
	if !slices.Equal(got, []string{"fields"}) {
		t.Fatalf("fields %v", got)
	}
	l, _ := structpb.NewList([]any{map[string]any{"a": 1}})
	got = transcript.ProtoFields(l)
	if !slices.Equal(got, []string{"values", "values[].struct_value", "values[].struct_value.fields"}) {
		t.Fatalf("fields %v", got)
	}
}
