package transcript

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"strconv"
)

// maxBody bounds a body read for its fields.
const maxBody = 8 << 20

// Transport records every call through base (nil: the default transport)
// as an entry: route names the call (its path with IDs as placeholders),
// JSON bodies give the fields, dataKeys name map-valued fields (labels,
// env) whose keys are data.
func (t *Transcript) Transport(base http.RoundTripper, route func(*http.Request) string, dataKeys ...string) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &recorder{t: t, base: base, route: route, dataKeys: dataKeys}
}

type recorder struct {
	t        *Transcript
	base     http.RoundTripper
	route    func(*http.Request) string
	dataKeys []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	e := Entry{Method: req.Method, Route: r.route(req)}
	if req.Body != nil && isJSON(req.Header.Get("Content-Type")) {
		b, err := io.ReadAll(io.LimitReader(req.Body, maxBody))
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		e.Request = JSONFields(b, r.dataKeys...)
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := r.base.RoundTrip(req)
	if err != nil {
		e.Status = "error"
		r.t.Add(e)
		return nil, err
	}
	e.Status = strconv.Itoa(resp.StatusCode)
	if isJSON(resp.Header.Get("Content-Type")) {
		b, rerr := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(b))
		if rerr == nil {
			e.Response = JSONFields(b, r.dataKeys...)
		}
	}
	r.t.Add(e)
	return resp, nil
}

func isJSON(ctype string) bool {
	mt, _, _ := mime.ParseMediaType(ctype)
	return mt == "application/json"
}

// CloseIdleConnections passes on to the recorded transport, so that a
// client's CloseIdleConnections still reaches it.
func (r *recorder) CloseIdleConnections() {
	if c, ok := r.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
