package llm

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"

	"github.com/berth-sh/berth/internal/httpserve"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// ErrContextLength is a prompt the endpoint refused as longer than the
// model's context.
var ErrContextLength = errors.New("the prompt exceeds the model's context length")

// Options configure a Client.
type Options struct {
	// BaseURL is the endpoint's OpenAI base URL. Calls go to
	// BaseURL/chat/completions when it ends in /v1, else to
	// BaseURL/v1/chat/completions (a session server's session URL).
	BaseURL string
	// APIKey is sent as a bearer token when set.
	APIKey string
	// Model is the request's model field.
	Model string
	// MaxRetries of one call after a throttle, a server error or a lost
	// connection (default 4; negative means none).
	MaxRetries int
	// MaxRetryDelay caps one wait between retries, a Retry-After included
	// (default 30 s).
	MaxRetryDelay time.Duration
	// RequestTimeout bounds each attempt (default 10 min).
	RequestTimeout time.Duration
	// HTTP defaults to a client of its own.
	HTTP *http.Client
}

// Client calls one endpoint. It is safe for concurrent use.
type Client struct {
	o   Options
	svc openai.ChatCompletionService
}

// New checks o and returns a client.
func New(o Options) (*Client, error) {
	u, err := url.Parse(o.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "model endpoint %q is not an http(s) URL", redactURL(o.BaseURL))
	}
	if u.User != nil {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "model endpoint URL holds a credential; give the key through a file or the environment instead")
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = 4
	}
	if o.MaxRetries < 0 {
		o.MaxRetries = 0
	}
	if o.MaxRetryDelay <= 0 {
		o.MaxRetryDelay = 30 * time.Second
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 10 * time.Minute
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{Transport: httpserve.Transport()}
	}
	base := strings.TrimRight(o.BaseURL, "/")
	if !strings.HasSuffix(base, "/v1") {
		base += "/v1"
	}
	// The service alone, not openai.NewClient: that one reads OPENAI_API_KEY
	// and OPENAI_BASE_URL from the process environment.
	opts := []option.RequestOption{
		option.WithHTTPClient(o.HTTP),
		option.WithBaseURL(base + "/"),
		option.WithMaxRetries(o.MaxRetries),
		option.WithMaxRetryDelay(o.MaxRetryDelay),
		option.WithRequestTimeout(o.RequestTimeout),
	}
	if o.APIKey != "" {
		opts = append(opts, option.WithAPIKey(o.APIKey))
	}
	return &Client{o: o, svc: openai.NewChatCompletionService(opts...)}, nil
}

// Message is one chat message.
type Message struct {
	Role    string `json:"role"` // system, user or assistant
	Content string `json:"content"`
}

// Request is one call.
type Request struct {
	Messages []Message
	// MaxTokens bounds the reply (max_tokens); 0 leaves it to the endpoint.
	MaxTokens int
	// Temperature, when set.
	Temperature *float64
}

// Usage is the call's token accounting as the endpoint reported it.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	CachedTokens     int64 `json:"cached_tokens"`
}

// Reply is the assistant's answer.
type Reply struct {
	Content          string
	ReasoningContent string
	FinishReason     string
	Usage            Usage
	// Attempts counts the HTTP requests the call made (1 without retries).
	Attempts int
}

// Chat sends one request and returns the first choice. A failure is a
// classed error; a context-length refusal wraps ErrContextLength.
func (c *Client) Chat(ctx context.Context, r Request) (*Reply, error) {
	msgs := make([]openai.ChatCompletionMessageParamUnion, 0, len(r.Messages))
	for _, m := range r.Messages {
		switch m.Role {
		case "system":
			msgs = append(msgs, openai.SystemMessage(m.Content))
		case "user":
			msgs = append(msgs, openai.UserMessage(m.Content))
		case "assistant":
			msgs = append(msgs, openai.AssistantMessage(m.Content))
		default:
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "message role %q", m.Role)
		}
	}
	p := openai.ChatCompletionNewParams{Model: c.o.Model, Messages: msgs}
	if r.Temperature != nil {
		p.Temperature = param.NewOpt(*r.Temperature)
	}
	var attempts atomic.Int32
	opts := []option.RequestOption{option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		attempts.Add(1)
		return next(req)
	})}
	if r.MaxTokens > 0 {
		// max_tokens, which every engine reads; the SDK's field for it is
		// deprecated in favour of max_completion_tokens, which some do not.
		opts = append(opts, option.WithJSONSet("max_tokens", r.MaxTokens))
	}
	resp, err := c.svc.New(ctx, p, opts...)
	n := int(attempts.Load())
	if err != nil {
		return nil, c.classify(ctx, err, n)
	}
	if len(resp.Choices) == 0 {
		return nil, errdefs.Errorf(errdefs.Unavailable, "model endpoint: a reply without choices")
	}
	ch := resp.Choices[0]
	rep := &Reply{Content: ch.Message.Content, FinishReason: ch.FinishReason, Attempts: n,
		Usage: Usage{PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens,
			CachedTokens: resp.Usage.PromptTokensDetails.CachedTokens}}
	if f, ok := ch.Message.JSON.ExtraFields["reasoning_content"]; ok {
		_ = json.Unmarshal([]byte(f.Raw()), &rep.ReasoningContent)
	}
	// SGLang reports the cached prefix per choice.
	if f, ok := ch.JSON.ExtraFields["meta_info"]; ok && rep.Usage.CachedTokens == 0 {
		var mi struct {
			CachedTokens int64 `json:"cached_tokens"`
		}
		if json.Unmarshal([]byte(f.Raw()), &mi) == nil {
			rep.Usage.CachedTokens = mi.CachedTokens
		}
	}
	return rep, nil
}
