package e2b

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth/sandbox/types"
)

// APIError is a non-2xx answer of the control plane. RetryAfter is the wait
// the server advised (Retry-After) on a throttle; the create gate of
// package sandbox/throttle honours it.
type APIError struct {
	Status  int    // HTTP status
	Code    int    // the body's code, 0 when absent
	Message string // the body's message, redacted and bounded
	wait    time.Duration
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("%d %s", e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// RetryAfter is the server's advised wait, zero when it gave none.
func (e *APIError) RetryAfter() time.Duration { return e.wait }

// class maps the answer onto berth's classes. Not-found is read from the
// body's code too: servers answer a missing sandbox that way on routes
// whose status says something else.
func (e *APIError) class() types.Class {
	if e.Status == http.StatusNotFound || e.Code == http.StatusNotFound {
		return types.NotFound
	}
	switch e.Status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusRequestEntityTooLarge:
		return types.InvalidArgument
	case http.StatusUnauthorized, http.StatusForbidden:
		return types.Unauthenticated
	case http.StatusConflict:
		return types.AlreadyExists
	case http.StatusTooManyRequests:
		return types.ResourceExhausted
	case http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return types.NotSupported
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return types.Unavailable
	}
	if e.Status >= 500 {
		return types.Unavailable
	}
	return types.Unknown
}

// maxMessage bounds the server's text kept in an error.
const maxMessage = 512

// newAPIError reads a failed answer's body ({"code","message"} or text).
func newAPIError(res *http.Response, body []byte, redact func(string) string) *APIError {
	e := &APIError{Status: res.StatusCode, wait: retryAfter(res.Header.Get("Retry-After"), time.Now())}
	var b struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &b) == nil {
		e.Code, e.Message = b.Code, b.Message
	} else {
		e.Message = strings.TrimSpace(string(body))
	}
	e.Message = redact(e.Message)
	if len(e.Message) > maxMessage {
		e.Message = e.Message[:maxMessage] + "..."
	}
	return e
}

// retryAfter parses a Retry-After value: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0
		}
		return time.Duration(min(s, 24*3600)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// redactedMark replaces a secret in text.
const redactedMark = "[redacted]"

// minSecret is the shortest secret worth redacting: shorter ones would
// garble every message and hide nothing.
const minSecret = 4

func redact(s string, secrets ...string) string {
	for _, sec := range secrets {
		if len(sec) >= minSecret {
			s = strings.ReplaceAll(s, sec, redactedMark)
		}
	}
	return s
}

// scrubbed prints its cause with the secrets removed; the cause stays
// reachable for errors.Is and errors.As (classes included).
type scrubbed struct {
	err     error
	secrets []string
}

func (e *scrubbed) Error() string { return redact(e.err.Error(), e.secrets...) }
func (e *scrubbed) Unwrap() error { return e.err }

// scrub keeps the secrets out of err's text.
func scrub(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, s := range secrets {
		if len(s) >= minSecret && strings.Contains(msg, s) {
			return &scrubbed{err: err, secrets: secrets}
		}
	}
	return err
}
