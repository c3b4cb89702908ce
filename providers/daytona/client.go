package daytona

import (
	"context"
	"net/http"

	"github.com/berth-sh/berth/providers/internal/rest"
)

// Bounds on what the driver reads from a response it buffers.
const (
	maxErrorBody = 64 << 10
	maxJSONBody  = 32 << 20
)

// client sends authenticated requests to the REST API and the toolbox
// through the shared REST client, which puts the key in the Authorization
// header of requests to the API's origin and the toolbox proxy's only.
type client struct {
	base string       // REST base URL, no trailing slash
	key  Secret       // revealed only into the Authorization header
	rc   *rest.Client // retries, Retry-After, redaction, body bounds
}

// send performs cl and returns the 2xx response; the caller closes it.
func (c *client) send(ctx context.Context, cl rest.Call) (*http.Response, error) {
	return c.rc.Send(ctx, cl)
}

// do sends cl and decodes a JSON answer into out (nil discards it).
func (c *client) do(ctx context.Context, cl rest.Call, out any) error {
	_, err := c.rc.Do(ctx, cl, out)
	return err
}

// api is the REST URL of path (which starts with "/").
func (c *client) api(path string) string { return c.base + path }

// redact removes the API key from a server text before it becomes an
// error: a proxy that echoes the Authorization header must not leak it.
func (c *client) redact(s string) string { return c.rc.Redact(s) }
