package terminus

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/harbor/agent/llm"
	"github.com/berth-sh/berth/harbor/agent/shellsession"
	"github.com/berth-sh/berth/sandbox"
)

// Name and Version of the agent, as result.json's agent_info has them.
const (
	Name    = "terminus"
	Version = "1.0.0"
)

// Options configure the agent.
type Options struct {
	// APIBase is the model's OpenAI-compatible base URL (…/v1, or a
	// session server's session URL).
	APIBase string
	// APIKey, when the endpoint needs one: only ever sent as a bearer token.
	APIKey string
	// Model is the request's model field.
	Model string
	// MaxTurns bounds the model calls of one run (default 100).
	MaxTurns int
	// ContextTokens is the model's context budget: each request's
	// max_tokens leaves the prompt room within it, and a reply cut there
	// ends the run as context-length exhaustion. 0: the endpoint's own.
	ContextTokens int
	// MaxOutputTokens bounds one reply; 0: the endpoint's own.
	MaxOutputTokens int
	// Temperature, when set.
	Temperature *float64
	// ObservationBytes bounds the terminal output given back per turn
	// (default 10000: head and tail are kept).
	ObservationBytes int
	// Shell is "auto" (tmux when the sandbox has it), "tmux" or "pipe".
	Shell string
	// MaxRetries of a model call (the llm client's default when 0).
	MaxRetries int
	// RetryDelay caps one wait between retries (the client's default when 0).
	RetryDelay time.Duration
	// HTTP, when set, is the model client's HTTP client.
	HTTP *http.Client
}

// Agent is the terminus agent; one value runs one trial.
type Agent struct {
	o   Options
	llm *llm.Client

	mu    sync.Mutex
	traj  trajectory
	turns []TurnMetrics
	end   string
	kind  string
}

var (
	_ agent.Agent    = (*Agent)(nil)
	_ agent.Reporter = (*Agent)(nil)
)

// New checks o and returns an agent.
func New(o Options) (*Agent, error) {
	if o.MaxTurns <= 0 {
		o.MaxTurns = 100
	}
	if o.ObservationBytes <= 0 {
		o.ObservationBytes = 10000
	}
	if o.ContextTokens < 0 || o.MaxOutputTokens < 0 {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "token limits must not be negative")
	}
	switch o.Shell {
	case "", "auto", "tmux", "pipe":
	default:
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "shell %q: want auto, tmux or pipe", o.Shell)
	}
	c, err := llm.New(llm.Options{BaseURL: o.APIBase, APIKey: o.APIKey, Model: o.Model, MaxRetries: o.MaxRetries, MaxRetryDelay: o.RetryDelay, HTTP: o.HTTP})
	if err != nil {
		return nil, err
	}
	return &Agent{o: o, llm: c}, nil
}

// Name implements agent.Agent.
func (a *Agent) Name() string { return Name }

// Version implements agent.Agent.
func (a *Agent) Version() string { return Version }

// Setup implements agent.Agent: the shell starts with the run.
func (a *Agent) Setup(context.Context, agent.Env) error { return nil }

// Ends of a run, as the metrics name them.
const (
	EndTaskComplete  = "task_complete"
	EndTurnLimit     = "turn_limit"
	EndContextLength = "context_length"
	EndModelError    = "model_error"
	EndSandboxError  = "sandbox_error"
	EndCancelled     = "cancelled"
)

// Run implements agent.Agent.
func (a *Agent) Run(ctx context.Context, env agent.Env) (err error) {
	sh, err := shellsession.Open(ctx, env.Sandbox, shellsession.Options{Mode: a.o.Shell, Dir: env.Task.Workdir, MaxOutput: a.o.ObservationBytes})
	if err != nil {
		a.setEnd(EndSandboxError)
		return &agent.SandboxError{Err: err}
	}
	defer sh.Close(context.WithoutCancel(ctx))
	a.mu.Lock()
	a.kind = sh.Kind()
	a.mu.Unlock()
	screen, err := sh.Output(ctx)
	if err != nil {
		a.setEnd(EndSandboxError)
		return &agent.SandboxError{Err: err}
	}
	l := &loop{a: a, sh: sh}
	l.add("system", systemPrompt)
	l.add("user", firstMessage(env.Task.Instruction, sh.Kind(), screen))
	err = l.run(ctx)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		a.setEnd(EndCancelled)
	case errors.Is(err, agent.ErrContextLength):
		a.setEnd(EndContextLength)
	case isA[*agent.ModelError](err):
		a.setEnd(EndModelError)
	default:
		a.setEnd(EndSandboxError)
	}
	return err
}

func isA[T error](err error) bool {
	var t T
	return errors.As(err, &t)
}

func (a *Agent) setEnd(e string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.end == "" {
		a.end = e
	}
}

// loop is one run's conversation.
type loop struct {
	a       *Agent
	sh      shellsession.Session
	msgs    []llm.Message
	usedTok int64 // prompt + completion tokens of the last turn
	confirm bool  // the last reply marked the task complete
}

// add appends a system or user message, a step of its own.
func (l *loop) add(role, content string) {
	l.msgs = append(l.msgs, llm.Message{Role: role, Content: content})
	l.a.step(role, content)
}

func (l *loop) run(ctx context.Context) error {
	for turn := 1; turn <= l.a.o.MaxTurns; turn++ {
		m := TurnMetrics{Turn: turn}
		maxTok, err := l.budget()
		if err != nil {
			return err
		}
		start := time.Now()
		rep, err := l.a.llm.Chat(ctx, llm.Request{Messages: l.msgs, MaxTokens: maxTok, Temperature: l.a.o.Temperature})
		m.GenerationSeconds = time.Since(start).Seconds()
		if err != nil {
			l.a.addTurn(m)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, llm.ErrContextLength) {
				return fmt.Errorf("%w: %w", agent.ErrContextLength, err)
			}
			return &agent.ModelError{Err: err}
		}
		m.PromptTokens, m.CompletionTokens, m.CachedTokens = rep.Usage.PromptTokens, rep.Usage.CompletionTokens, rep.Usage.CachedTokens
		m.Attempts, m.FinishReason = rep.Attempts, rep.FinishReason
		l.usedTok = rep.Usage.PromptTokens + rep.Usage.CompletionTokens
		l.msgs = append(l.msgs, llm.Message{Role: "assistant", Content: rep.Content})

		if rep.FinishReason == "length" {
			if l.contextCut(maxTok) {
				l.a.agentStep(rep, nil, "", m)
				l.a.addTurn(m)
				return fmt.Errorf("%w: the reply was cut at %d tokens with %d in the prompt", agent.ErrContextLength, rep.Usage.CompletionTokens, rep.Usage.PromptTokens)
			}
			l.a.agentStep(rep, nil, cutFeedback, m)
			l.a.addTurn(m)
			l.msgs = append(l.msgs, llm.Message{Role: "user", Content: cutFeedback})
			continue
		}
		parsed, perr := ParseReply(rep.Content)
		if perr != nil {
			fb := parseFeedback(perr)
			m.ParseError = perr.Error()
			l.a.agentStep(rep, nil, fb, m)
			l.a.addTurn(m)
			l.msgs = append(l.msgs, llm.Message{Role: "user", Content: fb})
			l.confirm = false
			continue
		}
		tool := time.Now()
		out, notes, err := l.execute(ctx, parsed)
		m.ToolSeconds = time.Since(tool).Seconds()
		m.Commands = len(parsed.Commands)
		if err != nil {
			l.a.agentStep(rep, parsed, "", m)
			l.a.addTurn(m)
			return err
		}
		if parsed.TaskComplete && l.confirm {
			l.a.agentStep(rep, parsed, "", m)
			l.a.addTurn(m)
			l.a.setEnd(EndTaskComplete)
			return nil
		}
		l.confirm = parsed.TaskComplete
		obs := observation(out, append(parsed.Warnings, notes...), l.confirm)
		l.a.agentStep(rep, parsed, obs, m)
		l.a.addTurn(m)
		l.msgs = append(l.msgs, llm.Message{Role: "user", Content: obs})
	}
	l.a.setEnd(EndTurnLimit)
	return nil
}

// budget is the next request's max_tokens: the output limit, lowered to
// what the context leaves after the prompt (estimated from the last turn's
// usage plus the bytes added since). A context with no room left ends the
// run.
func (l *loop) budget() (int, error) {
	max := l.a.o.MaxOutputTokens
	if l.a.o.ContextTokens <= 0 {
		return max, nil
	}
	est := l.usedTok
	// The messages since the last reply, at a conservative 3 bytes a token.
	for i := len(l.msgs) - 1; i >= 0 && l.msgs[i].Role != "assistant"; i-- {
		est += int64(len(l.msgs[i].Content))/3 + 8
	}
	left := int64(l.a.o.ContextTokens) - est
	if left <= 0 {
		return 0, fmt.Errorf("%w: about %d tokens in the prompt for a context of %d", agent.ErrContextLength, est, l.a.o.ContextTokens)
	}
	if max == 0 || left < int64(max) {
		return int(left), nil
	}
	return max, nil
}

// contextCut tells a reply cut by the context from one cut by the output
// limit: it is the context when the request's budget came from the context,
// or when the endpoint cut it without any limit of ours.
func (l *loop) contextCut(maxTok int) bool {
	out := l.a.o.MaxOutputTokens
	return out == 0 || maxTok < out
}

// execute types the reply's commands and collects the terminal's output.
func (l *loop) execute(ctx context.Context, r *Reply) (string, []string, error) {
	var notes []string
	idle := true
	for i, c := range r.Commands {
		wait := time.Duration(c.Duration * float64(time.Second))
		ok, err := l.sh.Send(ctx, c.Keystrokes, wait)
		switch {
		case err == nil:
			idle = ok
		case ctx.Err() != nil:
			return "", nil, ctx.Err()
		case errors.Is(err, shellsession.ErrKey):
			notes = append(notes, fmt.Sprintf("command %d was not sent: %v", i+1, err))
		default:
			return "", nil, &agent.SandboxError{Err: err}
		}
	}
	out, err := l.sh.Output(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return "", nil, ctx.Err()
		}
		return "", nil, &agent.SandboxError{Err: err}
	}
	if !idle {
		notes = append(notes, "the last command is still running")
	}
	return out, notes, nil
}
