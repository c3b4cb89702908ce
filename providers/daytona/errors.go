package daytona

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth/sandbox/throttle"
	"github.com/berth-sh/berth/sandbox/types"
)

// APIError is an HTTP error answer of the REST or toolbox API. It is the
// cause inside the classed errors the driver returns; errors.As finds it.
type APIError struct {
	Status  int    // HTTP status
	Method  string // request method
	Path    string // request path, without the query
	Message string // the server's message, redacted
	// Throttler names the rate limiter that refused a 429
	// ("sandbox-create"), when the answer said.
	Throttler string
	wait      time.Duration
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("daytona API: %s %s: %d %s", e.Method, e.Path, e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Throttler != "" {
		msg += " (throttler " + e.Throttler + ")"
	}
	return msg
}

// RetryAfter is the wait the server advised (Retry-After or
// Retry-After-<throttler>); zero when it advised none. The create gate of
// package throttle honours it.
func (e *APIError) RetryAfter() time.Duration { return e.wait }

var _ throttle.RetryAfter = (*APIError)(nil)

// quotaText matches Daytona's account quota refusals ("Total disk limit
// exceeded. Maximum allowed: 30GiB."), which waiting does not cure.
var quotaText = regexp.MustCompile(`(?i)total [a-z ]*limit exceeded|quota exceeded`)

// classify turns an API error into a classed error. A used-up quota is
// ResourceExhausted and Permanent; a 429 is ResourceExhausted and retryable.
func classify(e *APIError) error {
	if quotaText.MatchString(e.Message) && e.Status != http.StatusTooManyRequests {
		return throttle.Permanent(&types.Error{Class: types.ResourceExhausted, Err: e})
	}
	c := types.Unknown
	switch {
	case e.Status == http.StatusUnauthorized, e.Status == http.StatusForbidden:
		c = types.Unauthenticated
	case e.Status == http.StatusNotFound, e.Status == http.StatusGone:
		c = types.NotFound
	case e.Status == http.StatusConflict:
		c = types.AlreadyExists
	case e.Status == http.StatusTooManyRequests:
		c = types.ResourceExhausted
	case e.Status == http.StatusRequestTimeout, e.Status == http.StatusGatewayTimeout:
		c = types.DeadlineExceeded
	case e.Status >= 500:
		c = types.Unavailable
	case e.Status >= 400:
		c = types.InvalidArgument
	}
	return &types.Error{Class: c, Err: e}
}

// errorBody is Daytona's error answer: {statusCode, error, message, path,
// timestamp}; message is a string or, for validation errors, a list.
type errorBody struct {
	Message json.RawMessage `json:"message"`
	Error   string          `json:"error"`
}

// messageOf extracts the message of an error body, or its text.
func messageOf(body []byte) string {
	var eb errorBody
	if json.Unmarshal(body, &eb) == nil {
		var s string
		if json.Unmarshal(eb.Message, &s) == nil && s != "" {
			return s
		}
		var list []string
		if json.Unmarshal(eb.Message, &list) == nil && len(list) > 0 {
			return strings.Join(list, "; ")
		}
		if eb.Error != "" {
			return eb.Error
		}
	}
	return strings.TrimSpace(string(body))
}

// retryAfter reads Retry-After and every Retry-After-<throttler> header and
// returns the longest wait and the throttler that asked for it.
func retryAfter(h http.Header, now time.Time) (time.Duration, string) {
	var wait time.Duration
	var throttler string
	for k, vs := range h {
		name, ok := strings.CutPrefix(http.CanonicalHeaderKey(k), "Retry-After")
		if !ok || len(vs) == 0 || (name != "" && name[0] != '-') {
			continue
		}
		d := parseRetryAfter(vs[0], now)
		if d > wait {
			wait, throttler = d, strings.ToLower(strings.TrimPrefix(name, "-"))
		}
	}
	if wait > maxAdvisedWait {
		wait = maxAdvisedWait
	}
	return wait, throttler
}

// maxAdvisedWait bounds a server's advice so that a bad header cannot park a
// caller for hours.
const maxAdvisedWait = 5 * time.Minute

func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// redact removes the API key from a server text before it becomes an
// error: a proxy that echoes the Authorization header must not leak it.
func redact(key Secret, s string) string {
	k := key.Reveal()
	if len(k) < 4 { // a key this short would blank ordinary words
		return s
	}
	return strings.ReplaceAll(s, k, "[redacted]")
}
