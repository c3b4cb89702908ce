package localagent

import (
	"bufio"
	"context"
	"crypto/subtle"
	"io"
	"net/http"
	"strings"

	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// TreePath is the agent's route for whole trees, next to envd's routes
// (its name cannot clash with theirs, see pid1.ControlPath):
//
//	POST TreePath?dir=ABS   body: a tar stream, unpacked into dir (created)
//	GET  TreePath?path=ABS  answer: a tar stream of the tree at path
//
// Both need the access token (X-Access-Token) and act as the sandbox's
// default user. The agent serves them itself, so a transfer costs one HTTP
// call instead of a berth process started inside the sandbox.
//
// A failure before the answer's first byte is a non-2xx status with the
// error's class in errClassHeader and its message as the body; a download
// that fails later ends its chunked body with the same two fields as
// trailers, so that a cut archive never reads as a whole one.
const TreePath = "/berth.agent/tree"

const (
	errClassHeader = "X-Berth-Error-Class"
	errMsgHeader   = "X-Berth-Error"
	// maxErrMsg bounds an error message on the wire.
	maxErrMsg = 2048
)

// treeServer serves TreePath.
type treeServer struct {
	token string
	// user is who transfers act as ("" is the agent's own user).
	user   string
	users  accounts
	budget *threadBudget
}

var _ http.Handler = (*treeServer)(nil)

func newTreeServer(token, user string, b *threadBudget) *treeServer {
	return &treeServer{token: token, user: user, budget: b}
}

func (s *treeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get(envd.AccessTokenHeader)), []byte(s.token)) != 1 {
		writeError(w, errdefs.Errorf(errdefs.Unauthenticated, "missing or invalid access token"))
		return
	}
	switch r.Method {
	case http.MethodPost:
		s.upload(w, r)
	case http.MethodGet:
		s.download(w, r)
	default:
		w.Header().Set("Allow", "GET, POST")
		writeError(w, errdefs.Errorf(errdefs.NotSupported, "method %s on %s", r.Method, TreePath))
	}
}

// transfer runs fn as the transfers' user within the thread budget: as
// another user on a locked thread of its own, holding a dedicated slot
// for all of fn (sl is nil); as the agent's own user holding a short slot
// except while fn reads or writes the network through sl.
func (s *treeServer) transfer(ctx context.Context, fn func(sl *slot) error) error {
	sl := &slot{ctx: ctx, sem: s.budget.short}
	defer sl.give()
	if err := sl.take(); err != nil {
		return err
	}
	acct, err := s.users.lookup(s.user) // reads /etc/passwd once
	if err != nil {
		return err
	}
	if acct == nil {
		return fn(sl)
	}
	sl.give()
	if err := s.budget.dedicated.Acquire(ctx, 1); err != nil {
		return err
	}
	defer s.budget.dedicated.Release(1)
	return asUser(acct, func() error { return fn(nil) })
}

func (s *treeServer) upload(w http.ResponseWriter, r *http.Request) {
	err := s.transfer(r.Context(), func(sl *slot) error {
		return extractTar(r.Context(), r.URL.Query().Get("dir"), bufio.NewReaderSize(sl.reader(r.Body), 64<<10))
	})
	if err != nil {
		// Take the rest of the body first: a client still sending would
		// otherwise see its write fail instead of this answer.
		_, _ = io.Copy(io.Discard, r.Body)
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *treeServer) download(w http.ResponseWriter, r *http.Request) {
	out := &countWriter{w: w}
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Trailer", errClassHeader+", "+errMsgHeader)
	err := s.transfer(r.Context(), func(sl *slot) error {
		// Nothing reaches w before the first 32 KiB or the end, so an
		// error up to then (a missing path) can still be a status.
		// Past that, the whole entries before an error go out.
		bw := bufio.NewWriterSize(sl.writer(out), 32<<10)
		err := writeTar(r.Context(), r.URL.Query().Get("path"), bw)
		if err == nil || out.n > 0 {
			if ferr := bw.Flush(); err == nil {
				err = ferr
			}
		}
		return err
	})
	switch {
	case err == nil:
	case out.n == 0:
		writeError(w, err)
	default:
		// The status went out with the first bytes: the trailers say the
		// archive is cut. A client that went away reads neither.
		w.Header().Set(errClassHeader, errdefs.ClassOf(err).String())
		w.Header().Set(errMsgHeader, oneLine(err.Error()))
	}
}

// countWriter counts what reached the ResponseWriter.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeError answers err with the status of its class in the one table
// (errdefs.HTTPStatus: a full disk, a Permanent ResourceExhausted, is
// 507), which the client reads back; errClassHeader names the class too,
// and marks the answer as this agent's.
func writeError(w http.ResponseWriter, err error) {
	class := errdefs.ClassOf(err)
	status := errdefs.HTTPStatus(err)
	h := w.Header()
	h.Del("Trailer")
	h.Set(errClassHeader, class.String())
	h.Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, oneLine(err.Error()))
}

// oneLine makes msg fit a header: no control characters, at most maxErrMsg
// bytes.
func oneLine(msg string) string {
	if len(msg) > maxErrMsg {
		msg = msg[:maxErrMsg]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(msg, "?"))
}
