package insandbox

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"time"

	"github.com/berth-sh/berth/agent/selfdriver"
	"github.com/berth-sh/berth/openenv"
	"github.com/berth-sh/berth/openenv/tbench2"
)

// KeyVar carries the key a launcher gave the server; Serve's caller reads
// and unsets it, so that commands of the episode do not inherit it.
const KeyVar = "BERTH_OPENENV_KEY"

// KeyHeader carries the key to the server: the providers' port proxies
// drop the usual ones (E2B's X-API-Key, Daytona's Authorization).
const KeyHeader = "X-Berth-Openenv-Key"

// ServeOptions configure the in-sandbox server.
type ServeOptions struct {
	TasksDir, DefaultTask string
	// Addr is the listen address; default "0.0.0.0:8000".
	Addr string
	// MaxEnvs bounds the sessions; default 1.
	MaxEnvs        int
	CommandTimeout time.Duration
	IdleTimeout    time.Duration
	// Key, when set, is required of every call but GET /health.
	Key    string
	Logger *slog.Logger
}

// Serve serves tbench2 over this machine until ctx ends.
func Serve(ctx context.Context, o ServeOptions, ready func(baseURL string)) error {
	if o.Addr == "" {
		o.Addr = fmt.Sprintf("0.0.0.0:%d", DefaultPort)
	}
	if o.MaxEnvs <= 0 {
		o.MaxEnvs = 1
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	prov, err := selfdriver.New()
	if err != nil {
		return err
	}
	defer prov.Close()
	factory, err := tbench2.NewFactory(tbench2.Options{
		Provider: prov, TasksDir: o.TasksDir, DefaultTask: o.DefaultTask, CommandTimeout: o.CommandTimeout,
		IdleTimeout: o.IdleTimeout, Logger: o.Logger,
	})
	if err != nil {
		return err
	}
	opts := openenv.Options{
		Factory: factory, Info: tbench2.Info(), MaxConcurrentEnvs: o.MaxEnvs, IdleTimeout: o.IdleTimeout, Logger: o.Logger,
	}
	if o.Key != "" {
		opts.Auth, opts.KeyHeader = oneKey(o.Key), KeyHeader
	}
	return openenv.ListenAndServe(ctx, o.Addr, opts, ready)
}

// oneKey is the launcher's key, the only one the server takes (serve's
// keyring would link berth serve into berth-agent).
type oneKey string

func (k oneKey) Check(got string) (string, bool) {
	return "launcher", got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(k)) == 1
}
