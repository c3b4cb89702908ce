package daytona

import (
	"encoding/json"
	"strings"

	"github.com/berth-sh/berth/providers/internal/rest"
)

// APIError is an HTTP error answer of the REST or toolbox API: the shared
// REST client's error. It is the cause inside the classed errors the
// driver returns; errors.As finds it. A throttle's advised wait
// (Retry-After or Retry-After-<throttler>) is the error's RetryAfter
// (errdefs.RetryAfterOf), and Throttler names the rate limiter.
type APIError = rest.APIError

// errorJSON is Daytona's error answer: {statusCode, error, message, path,
// timestamp} from the API, {statusCode, message, code, ...} from the
// toolbox; message is a string or, for validation errors, a list. The
// bulk upload answers {errors: [...]}.
type errorJSON struct {
	Message json.RawMessage `json:"message"`
	Error   string          `json:"error"`
	Errors  []string        `json:"errors"` // the bulk upload's
}

// errorBody extracts the message of an error body, or its text.
func errorBody(body []byte) (string, int) {
	var eb errorJSON
	if json.Unmarshal(body, &eb) == nil {
		var s string
		if json.Unmarshal(eb.Message, &s) == nil && s != "" {
			return s, 0
		}
		var list []string
		if json.Unmarshal(eb.Message, &list) == nil && len(list) > 0 {
			return strings.Join(list, "; "), 0
		}
		if eb.Error != "" {
			return eb.Error, 0
		}
		if len(eb.Errors) > 0 {
			return strings.Join(eb.Errors, "; "), 0
		}
	}
	return strings.TrimSpace(string(body)), 0
}
