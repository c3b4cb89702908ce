package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	pathpkg "path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth/internal/httpserve"
	"github.com/berth-sh/berth/session/tito"
)

// RoutingHeader carries the session id to the engine's router, so that a
// session's turns land where its prefix is cached.
const RoutingHeader = "X-SMG-Routing-Key"

// ErrUpstream marks a failed engine call (HTTP 502): unreachable, or a
// 200 reply that lacks what the dialect promises.
var ErrUpstream = errors.New("upstream error")

// ErrBadPath marks a relayed path that could leave the engine's base path
// (HTTP 400); it is never sent.
var ErrBadPath = errors.New("invalid relay path")

// Dialect is the engine's flavour of the OpenAI chat API.
type Dialect int

// The dialects.
const (
	SGLang Dialect = iota
	VLLM
	OpenAI
)

func (d Dialect) String() string { return [...]string{"sglang", "vllm", "openai"}[d] }

// ParseDialect reads "sglang", "vllm" or "openai".
func ParseDialect(s string) (Dialect, error) {
	switch s {
	case "sglang":
		return SGLang, nil
	case "vllm":
		return VLLM, nil
	case "openai":
		return OpenAI, nil
	}
	return 0, fmt.Errorf("unknown engine dialect %q (sglang, vllm, openai)", s)
}

// Request is one chat turn to send.
type Request struct {
	// Body is the client's request body, stream fields removed; the
	// dialect adds its own fields.
	Body map[string]json.RawMessage
	// PromptIDs is the session's prompt.
	PromptIDs  []int
	RoutingKey string
}

// Completion is an engine's reply. Status other than 200 leaves only
// Status, Header and Body set.
type Completion struct {
	Status int
	Header http.Header
	Body   []byte

	// Response is the parsed reply, as the client will get it.
	Response     map[string]json.RawMessage
	Message      json.RawMessage
	FinishReason string
	OutputIDs    []int
	LogProbs     []float64
	// PromptIDs is the prompt the engine reports it saw (vLLM); nil when
	// it took the session's.
	PromptIDs []int
	Meta      tito.TurnMeta
	// TextOnly: the engine returned no token ids (OpenAI dialect).
	TextOnly bool
}

// Engine is an inference engine.
type Engine interface {
	// Chat sends one chat turn.
	Chat(ctx context.Context, req *Request) (*Completion, error)
	// Forward relays any other request (the pass-through proxy). path is
	// relative to the engine's base and escaped as it came on the wire;
	// one that could leave the base is refused with ErrBadPath.
	Forward(ctx context.Context, method, path, rawQuery string, header http.Header, body []byte, routingKey string) (*Completion, error)
	// Dialect reports how the engine speaks.
	Dialect() Dialect
}

// HTTP is an engine at a base URL.
type HTTP struct {
	base    *url.URL
	dialect Dialect
	client  *http.Client
	apiKey  string
	// MaxResponseBytes bounds what is read from the engine.
	MaxResponseBytes int64
}

// Options configure New.
type Options struct {
	// APIKey is sent to the engine as a bearer token (never the client's).
	APIKey string
	// Timeout bounds one engine call (default 10 minutes).
	Timeout time.Duration
	// MaxResponseBytes bounds a reply (default 64 MiB).
	MaxResponseBytes int64
	// Transport replaces the default HTTP transport (tests).
	Transport http.RoundTripper
}

// New returns an engine at rawURL (http or https, no credentials in it).
func New(rawURL string, d Dialect, o Options) (*HTTP, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("engine URL %q must be http(s)://host[:port][/path]", rawURL)
	}
	if u.User != nil {
		return nil, errors.New("engine URL must not carry credentials: use the engine API key file")
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.MaxResponseBytes == 0 {
		o.MaxResponseBytes = 64 << 20
	}
	tr := o.Transport
	if tr == nil {
		t := httpserve.Transport()
		t.MaxIdleConnsPerHost = 256
		tr = t
	}
	u.Path = strings.TrimRight(u.Path, "/")
	return &HTTP{base: u, dialect: d, client: &http.Client{Transport: tr, Timeout: o.Timeout}, apiKey: o.APIKey, MaxResponseBytes: o.MaxResponseBytes}, nil
}

// Dialect reports the engine's dialect.
func (e *HTTP) Dialect() Dialect { return e.dialect }

func (e *HTTP) do(ctx context.Context, method, path, rawQuery string, header http.Header, body []byte, routingKey string) (*Completion, error) {
	u := *e.base
	u.Path = e.base.Path + "/" + strings.TrimLeft(path, "/")
	if clean := pathpkg.Clean(u.Path); clean != strings.TrimSuffix(u.Path, "/") || !strings.HasPrefix(clean+"/", e.base.Path+"/") {
		return nil, fmt.Errorf("%w: %q leaves the engine's base path", ErrBadPath, clipPath(path))
	}
	u.RawPath = ""
	u.RawQuery = rawQuery
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUpstream, err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if routingKey != "" {
		req.Header.Set(RoutingHeader, routingKey)
	}
	if e.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.apiKey)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: engine transport: %v", ErrUpstream, redact(err, e.apiKey))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, e.MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the engine's reply: %v", ErrUpstream, err)
	}
	if int64(len(data)) > e.MaxResponseBytes {
		return nil, fmt.Errorf("%w: the engine's reply exceeds %d bytes", ErrUpstream, e.MaxResponseBytes)
	}
	return &Completion{Status: resp.StatusCode, Header: resp.Header, Body: data}, nil
}

// RelayPath checks an escaped path relative to the engine's base and
// returns it decoded. Each segment is decoded on its own; a segment that
// decodes to a dot segment ("." or "..", also before a ";" parameter,
// which some servers drop) or that holds a slash or a backslash is
// refused, as is an empty one inside the path: any of them can walk out of
// a base path such as http://router/prefix/ once the engine's server
// decodes and cleans what it got (on 5553f78 "%2e%2e/admin" reached it as
// /prefix/../admin).
func RelayPath(escaped string) (string, error) {
	segs := strings.Split(strings.TrimPrefix(escaped, "/"), "/")
	for i, seg := range segs {
		dec, err := url.PathUnescape(seg)
		if err != nil {
			return "", fmt.Errorf("%w: %q does not decode: %v", ErrBadPath, clipPath(escaped), err)
		}
		name, _, _ := strings.Cut(dec, ";")
		switch {
		case dec == "" && i < len(segs)-1, name == "." || name == "..", strings.ContainsAny(dec, `/\`):
			return "", fmt.Errorf("%w: %q: a path relayed to the engine may hold no dot segment, empty segment, encoded slash or backslash", ErrBadPath, clipPath(escaped))
		}
		segs[i] = dec
	}
	return strings.Join(segs, "/"), nil
}

func clipPath(p string) string {
	if len(p) > 120 {
		return p[:120] + "..."
	}
	return p
}

func redact(err error, secret string) string {
	if secret == "" {
		return err.Error()
	}
	return strings.ReplaceAll(err.Error(), secret, "[redacted]")
}

// Forward relays a request to the engine unchanged but for the routing
// header and the engine's own credentials.
func (e *HTTP) Forward(ctx context.Context, method, path, rawQuery string, header http.Header, body []byte, routingKey string) (*Completion, error) {
	path, err := RelayPath(path)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	for _, k := range []string{"Content-Type", "Accept"} {
		if v := header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	return e.do(ctx, method, path, rawQuery, h, body, routingKey)
}

// RequestBody is the body a dialect sends for r: the client's fields and
// the ones the dialect forces (for SGLang, the session's prompt as
// input_ids replaces whatever the client rendered).
func RequestBody(d Dialect, r *Request) map[string]json.RawMessage {
	body := make(map[string]json.RawMessage, len(r.Body)+6)
	for k, v := range r.Body {
		body[k] = v
	}
	delete(body, "input_ids")
	switch d {
	case SGLang:
		body["input_ids"] = appendInts(nil, r.PromptIDs)
		body["logprobs"] = json.RawMessage("true")
		body["return_meta_info"] = json.RawMessage("true")
		body["no_stop_trim"] = json.RawMessage("false")
	case VLLM:
		body["return_token_ids"] = json.RawMessage("true")
		body["logprobs"] = json.RawMessage("true")
	}
	return body
}

// Chat sends one turn in the engine's dialect.
func (e *HTTP) Chat(ctx context.Context, r *Request) (*Completion, error) {
	body := RequestBody(e.dialect, r)
	data := encodeBody(body)
	h := http.Header{"Content-Type": {"application/json"}}
	c, err := e.do(ctx, http.MethodPost, "v1/chat/completions", "", h, data, r.RoutingKey)
	if err != nil || c.Status != http.StatusOK {
		return c, err
	}
	if err := parseChat(c, e.dialect); err != nil {
		return nil, err
	}
	return c, nil
}

// encodeBody writes a JSON object from raw values without re-validating
// them (they were parsed on the way in): json.Marshal would compact every
// value again, which at 8k-token contexts costs more than the rest of a
// turn.
func encodeBody(body map[string]json.RawMessage) []byte {
	keys := make([]string, 0, len(body))
	n := 2
	for k, v := range body {
		keys = append(keys, k)
		n += len(k) + len(v) + 4
	}
	sort.Strings(keys)
	out := make([]byte, 0, n)
	out = append(out, '{')
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		kb, _ := json.Marshal(k)
		out = append(append(append(out, kb...), ':'), body[k]...)
	}
	return append(out, '}')
}

func appendInts(out []byte, ids []int) []byte {
	out = append(out, '[')
	for i, id := range ids {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendInt(out, int64(id), 10)
	}
	return append(out, ']')
}
