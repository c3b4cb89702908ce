package command

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkRelay is what the relay adds to one model request (a small
// chat completion, keep-alive connections), apart from the reverse port's
// own hop: compare the direct and relayed cases.
//
//	go test ./harbor/agent/command -run '^$' -bench Relay
func BenchmarkRelay(b *testing.B) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"ls"}}]}`)
	}))
	defer ts.Close()
	r, err := newRelay(ts.URL+"/v1", upstreamKey, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer r.close()
	body := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 2000) + `"}]}`
	for _, c := range []struct{ name, url, key string }{
		{"direct", ts.URL + "/v1/chat/completions", upstreamKey},
		{"relayed", "http://" + r.addr() + "/v1/chat/completions", r.token},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				req, _ := http.NewRequest("POST", c.url, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+c.key)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatal(resp.Status)
				}
			}
		})
	}
}
