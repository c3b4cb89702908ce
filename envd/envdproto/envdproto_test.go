package envdproto

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestInt64IsAStringOnTheWire(t *testing.T) {
	b, err := json.Marshal(EntryInfo{Name: "f", Size: 9007199254740993}) // above 2^53: a JSON number would lose it
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"size":"9007199254740993"`) {
		t.Fatalf("size not written as a string: %s", b)
	}
	for in, want := range map[string]Int64{`{"size":"12"}`: 12, `{"size":12}`: 12, `{"size":"-3"}`: -3, `{"size":1e3}`: 1000, `{"size":null}`: 0} {
		var e EntryInfo
		if err := json.Unmarshal([]byte(in), &e); err != nil || e.Size != want {
			t.Errorf("%s: size %d err %v, want %d", in, e.Size, err, want)
		}
	}
	var e EntryInfo
	if err := json.Unmarshal([]byte(`{"size":"twelve"}`), &e); err == nil {
		t.Error("a non-numeric size was accepted")
	}
}

func TestEnumsByNameOrNumber(t *testing.T) {
	var r SendSignalRequest
	if err := json.Unmarshal([]byte(`{"signal":9}`), &r); err != nil || r.Signal != SignalSIGKILL {
		t.Fatalf("numeric signal: %q %v", r.Signal, err)
	}
	if err := json.Unmarshal([]byte(`{"signal":"SIGNAL_SIGTERM"}`), &r); err != nil || r.Signal != SignalSIGTERM {
		t.Fatalf("named signal: %q %v", r.Signal, err)
	}
	var e EntryInfo
	if err := json.Unmarshal([]byte(`{"type":2}`), &e); err != nil || e.Type != FileTypeDirectory {
		t.Fatalf("numeric file type: %q %v", e.Type, err)
	}
	var ev FilesystemEvent
	if err := json.Unmarshal([]byte(`{"type":"EVENT_TYPE_WRITE"}`), &ev); err != nil || ev.Type != EventTypeWrite {
		t.Fatalf("event type: %q %v", ev.Type, err)
	}
}

func TestCodec(t *testing.T) {
	var c Codec
	if c.Name() != "json" {
		t.Fatalf("name %q", c.Name())
	}
	ev := &StartResponse{Event: &ProcessEvent{Data: &DataEvent{Stdout: []byte("<hi>\n")}}}
	out, err := c.MarshalAppend([]byte("prefix"), ev)
	if err != nil {
		t.Fatal(err)
	}
	// Bytes are base64; HTML characters are not escaped; no trailing newline.
	if string(out) != `prefix{"event":{"data":{"stdout":"PGhpPgo="}}}` {
		t.Fatalf("marshal append: %s", out)
	}
	var back StartResponse
	if err := c.Unmarshal([]byte(`{"event":{"end":{"exitCode":3,"exited":true,"status":"exit status 3","newField":[1]}},"other":{}}`), &back); err != nil {
		t.Fatalf("unknown fields must be ignored: %v", err)
	}
	if back.Event.End == nil || back.Event.End.ExitCode != 3 || !back.Event.End.Exited {
		t.Fatalf("end event %+v", back.Event)
	}
	var empty ListRequest
	if err := c.Unmarshal(nil, &empty); err != nil {
		t.Fatalf("empty body is the empty message: %v", err)
	}
	ts, _ := json.Marshal(EntryInfo{ModifiedTime: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)})
	if !strings.Contains(string(ts), `"modifiedTime":"2024-01-02T03:04:05Z"`) {
		t.Fatalf("timestamp: %s", ts)
	}
}
