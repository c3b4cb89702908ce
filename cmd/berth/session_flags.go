package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/berth-sh/berth/session"
	"github.com/berth-sh/berth/session/engine"
	"github.com/berth-sh/berth/session/testengine"
	"github.com/berth-sh/berth/session/tito"
)

// testEngineURL selects the scripted test engine (a demo, not a model).
const testEngineURL = "test:"

// sessionFlags are the session server's engine and tokenizer flags, shared
// by berth session-server and berth rollout (which runs one in process).
type sessionFlags struct {
	engineURL, dialect, engineKeyFile, family, tokDir, templatePath, matcher, version string
}

func (s *sessionFlags) add(f *pflag.FlagSet) {
	f.StringVar(&s.engineURL, "engine", "", `the inference engine's base URL (its router), or "test:" for the scripted test engine`)
	f.StringVar(&s.dialect, "engine-dialect", "sglang", "sglang (input_ids), vllm (return_token_ids) or openai (text only: re-tokenized here, counted)")
	f.StringVar(&s.engineKeyFile, "engine-api-key-file", "", "file holding the engine's API key (sent as a bearer token)")
	f.StringVar(&s.family, "model-family", "default", "boundary rules: "+strings.Join(tito.FamilyNames(), ", "))
	f.StringVar(&s.tokDir, "tokenizer", "", "Hugging Face model directory (tokenizer.json, tokenizer_config.json)")
	f.StringVar(&s.templatePath, "chat-template", "", "a Jinja file that replaces the model's chat template")
	matcherHelp := "how replayed history must match: strict, loose_tool_call (re-serialized tool arguments) or role_content_only (role and content alone)"
	f.StringVar(&s.matcher, "message-matcher", "strict", matcherHelp)
	f.StringVar(&s.matcher, "session-message-matcher", "strict", "the same as --message-matcher (Miles's name)")
	f.StringVar(&s.version, "session-version", "v1", "sessions by default: v1 (linear) or v2 (a tree: branches, forks, one sample per leaf; Miles's --use-session-server v2)")
}

// codec loads the tokenizer and template (usage errors when they cannot be).
func (s *sessionFlags) codec() (*tito.Codec, error) {
	if s.tokDir == "" {
		return nil, usageError(fmt.Errorf("--tokenizer DIR is required: a Hugging Face model directory with tokenizer.json and tokenizer_config.json"))
	}
	c, err := tito.LoadCodec(s.tokDir, s.family, s.templatePath)
	if err != nil {
		return nil, usageError(err)
	}
	return c, nil
}

// options fills o's engine, codec and matcher. scripts maps the test
// engine's names ("test:" and more) to their scripts; the returned stop
// ends a test engine.
func (s *sessionFlags) options(a *app, o *session.Options, scripts map[string]func(*tito.Codec) (testengine.Script, error)) (stop func(), err error) {
	stop = func() {}
	d, err := engine.ParseDialect(s.dialect)
	if err != nil {
		return stop, usageError(err)
	}
	if o.Matcher, err = tito.ParseMatcher(s.matcher); err != nil {
		return stop, usageError(err)
	}
	switch s.version {
	case "v1", "":
	case "v2":
		o.Tree = true
	default:
		return stop, usageError(fmt.Errorf("--session-version %q: want v1 or v2", s.version))
	}
	if o.Codec, err = s.codec(); err != nil {
		return stop, err
	}
	engineKey := ""
	if s.engineKeyFile != "" {
		b, err := os.ReadFile(a.env.ExpandHome(s.engineKeyFile))
		if err != nil {
			return stop, usageError(fmt.Errorf("--engine-api-key-file: %w", err))
		}
		engineKey = strings.TrimSpace(string(b))
	}
	url := s.engineURL
	if strings.HasPrefix(url, testEngineURL) {
		mk, ok := scripts[url]
		if !ok {
			return stop, usageError(fmt.Errorf("--engine %s: no such test engine here (known: %s)", url, strings.Join(keys(scripts), ", ")))
		}
		script, err := mk(o.Codec)
		if err != nil {
			return stop, usageError(err)
		}
		if url, stop, err = startTestEngine(o.Codec, script); err != nil {
			return func() {}, err
		}
		d = engine.SGLang
	}
	if o.Engine, err = engine.New(url, d, engine.Options{APIKey: engineKey}); err != nil {
		stop()
		return func() {}, usageError(err)
	}
	return stop, nil
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
