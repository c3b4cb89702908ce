package localagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// TreeClient moves trees through an agent's TreePath. The zero HTTP is
// http.DefaultClient.
type TreeClient struct {
	HTTP    *http.Client
	BaseURL string // e.g. envd.UnixBaseURL
	Token   string // the sandbox's access token; secret
}

// Upload unpacks the tar stream r into the absolute directory dir inside
// the sandbox, creating it.
func (c TreeClient) Upload(ctx context.Context, dir string, r io.Reader) error {
	op := "unpack tar in " + dir
	if r == nil {
		r = http.NoBody
	}
	req, err := c.request(ctx, http.MethodPost, "dir", dir, r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-tar")
	res, err := c.do(ctx, op, req)
	if err != nil {
		return err
	}
	res.Body.Close()
	return nil
}

// Download streams the tree at the absolute path p out of the sandbox. A
// missing path is NotFound from Download itself; an archive cut by an
// error reads as that error, never as a clean end; closing the stream
// early drops the connection, which stops the agent's work.
func (c TreeClient) Download(ctx context.Context, p string) (io.ReadCloser, error) {
	op := "tar " + p
	req, err := c.request(ctx, http.MethodGet, "path", p, nil)
	if err != nil {
		return nil, err
	}
	res, err := c.do(ctx, op, req)
	if err != nil {
		return nil, err
	}
	return &treeBody{res: res, op: op}, nil
}

func (c TreeClient) request(ctx context.Context, method, key, p string, body io.Reader) (*http.Request, error) {
	u := strings.TrimRight(c.BaseURL, "/") + TreePath + "?" + url.Values{key: {p}}.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "agent tree call: %w", err)
	}
	if c.Token != "" {
		req.Header.Set(envd.AccessTokenHeader, c.Token)
	}
	return req, nil
}

func (c TreeClient) do(ctx context.Context, op string, req *http.Request) (*http.Response, error) {
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	res, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", op, context.Cause(ctx))
		}
		return nil, errdefs.Errorf(errdefs.Unavailable, "%s: %w", op, err)
	}
	if res.StatusCode/100 == 2 {
		return res, nil
	}
	defer res.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(res.Body, maxErrMsg))
	if _, ok := classNamed(res.Header.Get(errClassHeader)); !ok {
		// Not this agent's answer: one that predates TreePath answers with
		// envd's 404 for unknown routes.
		return nil, errdefs.Errorf(errdefs.NotSupported, "%s: the sandbox's agent has no tree route (%s: %s)", op, res.Status, strings.TrimSpace(string(msg)))
	}
	// The status is the class's in the one table, Permanent included.
	return nil, errdefs.HTTPError(res.StatusCode, res.Header, fmt.Errorf("%s: %s", op, msg))
}

// treeBody reads a download: a cut archive is the error the trailers
// carry, a lost connection is Unavailable.
type treeBody struct {
	res  *http.Response
	op   string
	once sync.Once
}

func (b *treeBody) Read(p []byte) (int, error) {
	n, err := b.res.Body.Read(p)
	switch {
	case err == io.EOF:
		if name := b.res.Trailer.Get(errClassHeader); name != "" {
			class, _ := classNamed(name)
			err = errdefs.Errorf(class, "%s: %s", b.op, b.res.Trailer.Get(errMsgHeader))
		}
	case err != nil && !errors.Is(err, context.Canceled):
		err = errdefs.Classify(errdefs.Unavailable, fmt.Errorf("%s: %w", b.op, err))
	}
	return n, err
}

func (b *treeBody) Close() error {
	b.once.Do(func() { b.res.Body.Close() })
	return nil
}

// classNamed is the class whose String is name.
func classNamed(name string) (errdefs.Class, bool) {
	for c := errdefs.Unknown; c <= errdefs.NotSupported; c++ {
		if c.String() == name {
			return c, true
		}
	}
	return errdefs.Unknown, false
}
