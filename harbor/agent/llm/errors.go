package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// maxErrorText bounds the part of an endpoint's reply kept in an error.
const maxErrorText = 512

// contextTexts are how engines word a prompt longer than the context:
// OpenAI's code context_length_exceeded and "maximum context length",
// vLLM's "This model's maximum context length is N tokens", SGLang's
// "longer than the model's context length", Anthropic's "prompt is too
// long", TGI's "must have less than N tokens".
var contextTexts = []string{
	"context_length_exceeded", "context length", "context window", "maximum context",
	"prompt is too long", "input is too long", "too many tokens", "must have less than",
}

// classify turns the SDK's error into a classed one that holds neither
// the request (its headers carry the key) nor more than a bounded piece of
// the reply.
func (c *Client) classify(ctx context.Context, err error, attempts int) error {
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// No reply at all: the connection failed or an attempt timed out.
		return errdefs.Errorf(errdefs.Unavailable, "model endpoint unreachable after %d attempts: %s", attempts, c.redact(transportText(err)))
	}
	msg := apiErr.Message
	if msg == "" && apiErr.Response != nil && apiErr.Response.Body != nil {
		// The SDK reads only an {"error": {...}} object; engines and the
		// session server answer {"message": ...}, {"error": "..."} or text.
		body, _ := io.ReadAll(io.LimitReader(apiErr.Response.Body, 64<<10))
		msg = replyText(body)
	}
	msg = c.redact(clip(strings.TrimSpace(msg)))
	text := fmt.Sprintf("model endpoint answered %d after %d attempts: %s", apiErr.StatusCode, attempts, msg)
	lower := strings.ToLower(apiErr.Code + " " + msg)
	switch s := apiErr.StatusCode; {
	case s == http.StatusTooManyRequests:
		return errdefs.Errorf(errdefs.ResourceExhausted, "%s", text)
	case s >= 500:
		return errdefs.Errorf(errdefs.Unavailable, "%s", text)
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		return errdefs.Errorf(errdefs.Unauthenticated, "%s", text)
	case (s == http.StatusBadRequest || s == http.StatusRequestEntityTooLarge || s == http.StatusUnprocessableEntity) && containsAny(lower, contextTexts):
		return &errdefs.Error{Class: errdefs.InvalidArgument, Err: fmt.Errorf("%w: %s", ErrContextLength, text)}
	}
	return errdefs.Errorf(errdefs.InvalidArgument, "%s", text)
}

// replyText is the message of an error reply in the shapes engines use.
func replyText(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  any             `json:"detail"`
	}
	if json.Unmarshal(body, &v) != nil {
		return string(body)
	}
	var s string
	var obj struct {
		Message string `json:"message"`
		Code    any    `json:"code"`
	}
	switch {
	case json.Unmarshal(v.Error, &s) == nil && s != "":
		return s
	case json.Unmarshal(v.Error, &obj) == nil && obj.Message != "":
		return fmt.Sprintf("%s (%v)", obj.Message, obj.Code)
	case v.Message != "":
		return v.Message
	case v.Detail != nil:
		return fmt.Sprint(v.Detail)
	}
	return string(body)
}

// transportText is a transport error without the URL, which url.Error
// repeats (the base URL is the user's, but a session URL is a capability).
func transportText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return clip(err.Error())
}

func (c *Client) redact(s string) string {
	if c.o.APIKey != "" {
		s = strings.ReplaceAll(s, c.o.APIKey, "[redacted]")
	}
	return s
}

func containsAny(s string, subs []string) bool {
	for _, t := range subs {
		if strings.Contains(s, t) {
			return true
		}
	}
	return false
}

func clip(s string) string {
	if len(s) <= maxErrorText {
		return s
	}
	cut := maxErrorText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// redactURL keeps an endpoint's scheme, host and path for a message,
// never its user info or query.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}
