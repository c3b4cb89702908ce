package local

import (
	"context"
	"io"

	"github.com/berth-sh/berth/agent/localagent"
	"github.com/berth-sh/berth/envd"
)

// Trees move as one tar stream through the agent's own route
// (localagent.TreePath) on the sandbox's socket: the agent is PID 1 in the
// sandbox's mount namespace, so it reads and writes the sandbox's view of
// its files, as the sandbox's default user, with no process started and
// no tar needed in the image. A symlink planted in the sandbox leads
// nowhere outside it.

func (h *sandboxHandle) trees() localagent.TreeClient {
	return localagent.TreeClient{HTTP: h.http, BaseURL: envd.UnixBaseURL, Token: h.token}
}

// UploadTar unpacks the stream into dir inside the sandbox.
func (h *sandboxHandle) UploadTar(ctx context.Context, dir string, tarStream io.Reader) error {
	return h.gone(h.trees().Upload(ctx, dir, tarStream))
}

// DownloadTar streams the tree at path out of the sandbox. A missing path
// is NotFound before any byte; closing the stream early drops the
// connection, which stops the agent's archiving.
func (h *sandboxHandle) DownloadTar(ctx context.Context, path string) (io.ReadCloser, error) {
	rc, err := h.trees().Download(ctx, path)
	if err != nil {
		return nil, h.gone(err)
	}
	return rc, nil
}
