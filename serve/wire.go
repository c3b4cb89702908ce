package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/berth-sh/berth/sandbox"
)

// apiError is the control plane's error body; the SDKs read the code from
// it (a 404 without {"code":404} makes kill() throw instead of returning
// false).
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, apiError{Code: status, Message: fmt.Sprintf(format, args...)})
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
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
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

// createRequest is the body of POST /sandboxes and /v2/sandboxes; fields
// this server cannot honour are read so that they can be refused clearly.
type createRequest struct {
	TemplateID          string            `json:"templateID"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	Timeout             *int64            `json:"timeout"`
	Secure              *bool             `json:"secure"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	AutoPause           *bool             `json:"autoPause"`
	VolumeMounts        []json.RawMessage `json:"volumeMounts"`
	Network             *networkJSON      `json:"network"`
}

// networkJSON is the part of a create's network options this server
// reads: whether the sandbox's ports are open to anyone who names them.
type networkJSON struct {
	AllowPublicTraffic *bool `json:"allowPublicTraffic"`
}

type timeoutRequest struct {
	Timeout *int64 `json:"timeout"`
}

// sandboxJSON is the Sandbox schema: create, connect and resume answer it.
type sandboxJSON struct {
	SandboxID          string  `json:"sandboxID"`
	TemplateID         string  `json:"templateID"`
	Alias              string  `json:"alias,omitempty"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             string  `json:"domain"`
}

// listedJSON is the ListedSandbox schema.
type listedJSON struct {
	SandboxID   string            `json:"sandboxID"`
	TemplateID  string            `json:"templateID"`
	Alias       string            `json:"alias,omitempty"`
	ClientID    string            `json:"clientID"`
	CPUCount    int               `json:"cpuCount"`
	MemoryMB    int               `json:"memoryMB"`
	DiskSizeMB  int               `json:"diskSizeMB"`
	StartedAt   time.Time         `json:"startedAt"`
	EndAt       time.Time         `json:"endAt"`
	EnvdVersion string            `json:"envdVersion"`
	State       string            `json:"state"`
	Metadata    map[string]string `json:"metadata"`
}

// detailJSON is the SandboxDetail schema of GET /sandboxes/{id}.
type detailJSON struct {
	listedJSON
	EnvdAccessToken     string `json:"envdAccessToken"`
	Domain              string `json:"domain"`
	AllowInternetAccess bool   `json:"allowInternetAccess"`
}
