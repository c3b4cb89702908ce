package envd

import (
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Both backends' errors reach the one mapping of sandbox/errdefs: the
// sandbox API's by class, the host's by errno.
func TestErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   connect.Code
		status int
	}{
		{errdefs.Errorf(errdefs.NotFound, "x"), connect.CodeNotFound, 404},
		{fmt.Errorf("open: %w", fs.ErrNotExist), connect.CodeNotFound, 404},
		{errdefs.Errorf(errdefs.AlreadyExists, "x"), connect.CodeAlreadyExists, 409},
		{syscall.ENOTEMPTY, connect.CodeAlreadyExists, 409},
		{errdefs.Errorf(errdefs.InvalidArgument, "x"), connect.CodeInvalidArgument, 400},
		{fmt.Errorf("write: %w", syscall.EISDIR), connect.CodeInvalidArgument, 400},
		{errdefs.Errorf(errdefs.Unauthenticated, "x"), connect.CodePermissionDenied, 403},
		{syscall.EACCES, connect.CodePermissionDenied, 403},
		{errdefs.Errorf(errdefs.ResourceExhausted, "x"), connect.CodeResourceExhausted, 429},
		// A full disk does not pass by waiting: Permanent, 507.
		{syscall.ENOSPC, connect.CodeResourceExhausted, 507},
		{errdefs.WithPermanent(errdefs.Errorf(errdefs.ResourceExhausted, "x")), connect.CodeResourceExhausted, 507},
		{syscall.EMFILE, connect.CodeResourceExhausted, 429},
		{errdefs.Errorf(errdefs.Unavailable, "x"), connect.CodeUnavailable, 503},
		{errdefs.Errorf(errdefs.DeadlineExceeded, "x"), connect.CodeDeadlineExceeded, 504},
		{errdefs.Errorf(errdefs.NotSupported, "x"), connect.CodeUnimplemented, 501},
		{context.Canceled, connect.CodeCanceled, 499},
		{fmt.Errorf("odd"), connect.CodeUnknown, 500},
		// A class wins over the errno it wraps: the provider said what it meant.
		{errdefs.Classify(errdefs.Unavailable, syscall.ENOENT), connect.CodeUnavailable, 503},
	} {
		if got := codeOf(tc.err); got != tc.code {
			t.Errorf("codeOf(%v) = %v, want %v", tc.err, got, tc.code)
		}
		if got := httpStatusOf(tc.err); got != tc.status {
			t.Errorf("httpStatusOf(%v) = %d, want %d", tc.err, got, tc.status)
		}
	}
	if got := httpStatusOf(fmt.Errorf("copy: %w", &http.MaxBytesError{Limit: 1})); got != 413 {
		t.Errorf("MaxBytesError: %d, want 413", got)
	}
}

// TestClassRoundTripThroughEnvd: a class a server answers with comes back
// as the same class in the client, over Connect and over /files, for every
// class (Unknown included); a full disk stays Permanent. On 6f9918d (where
// this test does not compile: types has no RPC mapping) the envd client
// read a DeadlineExceeded /files answer (504) as Unavailable, which retry
// loops then retried.
func TestClassRoundTripThroughEnvd(t *testing.T) {
	for c := errdefs.Unknown; c <= errdefs.NotSupported; c++ {
		err := errdefs.Errorf(c, "x")
		if got := errdefs.ClassOfRPCCode(uint32(codeOf(err))); got != c {
			t.Errorf("Connect: %v -> %v -> %v", c, codeOf(err), got)
		}
		if got := errdefs.ClassOf(errdefs.HTTPError(httpStatusOf(err), nil, err)); got != c {
			t.Errorf("/files: %v -> %d -> %v", c, httpStatusOf(err), got)
		}
	}
	full := errdefs.HTTPError(httpStatusOf(syscall.ENOSPC), nil, syscall.ENOSPC)
	if errdefs.ClassOf(full) != errdefs.ResourceExhausted || !errdefs.IsPermanent(full) || errdefs.Retryable(full) {
		t.Errorf("a full disk came back as %v (permanent %v)", errdefs.ClassOf(full), errdefs.IsPermanent(full))
	}
}

func TestWriteRPCError(t *testing.T) {
	// Unary: the code's HTTP status and a JSON body.
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/filesystem.Filesystem/Stat", nil)
	r.Header.Set("Content-Type", "application/json")
	WriteRPCError(w, r, connect.CodeNotFound, "gone")
	if w.Code != http.StatusNotFound || strings.TrimSpace(w.Body.String()) != `{"code":"not_found","message":"gone"}` {
		t.Fatalf("unary: %d %s", w.Code, w.Body)
	}
	// Streaming: 200 and one end-of-stream envelope with the error.
	w = httptest.NewRecorder()
	r = httptest.NewRequest("POST", "/process.Process/Start", nil)
	r.Header.Set("Content-Type", "application/connect+json")
	WriteRPCError(w, r, connect.CodeUnauthenticated, "no")
	body := w.Body.Bytes()
	if w.Code != 200 || len(body) < 5 || body[0] != 0x02 || int(binary.BigEndian.Uint32(body[1:5])) != len(body)-5 {
		t.Fatalf("stream: %d %q", w.Code, body)
	}
	if string(body[5:]) != `{"error":{"code":"unauthenticated","message":"no"}}` {
		t.Fatalf("end-stream message %s", body[5:])
	}
}
