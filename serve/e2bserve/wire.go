package e2bserve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/sandbox"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, e2bapi.Error{Code: status, Message: fmt.Sprintf(format, args...)})
}

// writeRetry answers 429 with Retry-After, which SDKs >= 2.49 honour.
func writeRetry(w http.ResponseWriter, after time.Duration, format string, args ...any) {
	w.Header().Set("Retry-After", sandbox.RetryAfterHeader(after))
	writeError(w, http.StatusTooManyRequests, format, args...)
}

// writeClassed answers a failed call with the status of the error's class
// from the one HTTP mapping of sandbox/errdefs (a Permanent
// ResourceExhausted is 507), and the provider's advised wait, if any, as
// Retry-After; the e2b driver reads both back into the same class.
func writeClassed(w http.ResponseWriter, err error, format string, args ...any) {
	if d := sandbox.RetryAfterOf(err); d > 0 {
		w.Header().Set("Retry-After", sandbox.RetryAfterHeader(d))
	}
	writeError(w, sandbox.HTTPStatus(err), format, args...)
}

// readJSON decodes a bounded body (chunked or not) into v. An empty body
// is the empty object. Errors are answered here; false means stop.
func (s *API) readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.ContentLength > s.opts.MaxBodyBytes {
		writeError(w, http.StatusRequestEntityTooLarge, "request body of %d bytes is over the %d-byte limit", r.ContentLength, s.opts.MaxBodyBytes)
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "request body is over the %d-byte limit", s.opts.MaxBodyBytes)
			return false
		}
		writeError(w, http.StatusBadRequest, "reading the request body: %v", err)
		return false
	}
	if len(body) == 0 {
		return true
	}
	if err := json.Unmarshal(body, v); err != nil {
		writeError(w, http.StatusBadRequest, "request body is not valid JSON for this call: %v", err)
		return false
	}
	return true
}
