package hudserve

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/crypto/ssh"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/hud"
	"github.com/berth-sh/berth/hud/shellserve"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/sandbox"
)

// LabelLauncher is the launcher label of this server's sandboxes.
const LabelLauncher = "berth-hud"

// AnswerFile is where tasks.grade's answer lands before the verifier runs,
// as HUD's Harbor adapter puts it.
const AnswerFile = agent.LogsDir + "/agent_answer.txt"

// session is one control session's state: its credentials, and the task
// and sandbox in progress.
type session struct {
	s     *Server
	id    string
	token string // the MCP bearer token
	key   ssh.PublicKey
	pem   string // the SSH client key, OpenSSH PEM
	mcp   http.Handler

	mu   sync.Mutex
	task *task.Task
	sb   *sandbox.Sandbox
	bg   sync.WaitGroup // deletions after grade
}

// NewSession implements hud.Env: fresh credentials for each session.
func (s *Server) NewSession(_ context.Context, id string) (hud.Session, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	key, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return nil, err
	}
	var tok [32]byte
	_, _ = rand.Read(tok[:])
	se := &session{s: s, id: id, token: hex.EncodeToString(tok[:]), key: key, pem: string(pem.EncodeToMemory(block))}
	srv := shellserve.NewMCP(s.o.Name, s.o.Version, se.target)
	se.mcp = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		// Each request stands alone: no MCP session state outlives it, so
		// nothing is left to expire when the HUD session ends.
		Stateless:    true,
		JSONResponse: true,
		// The bearer token already proves the caller; DNS rebinding is a
		// browser's problem the token rules out, and tunnelled requests
		// carry whatever Host the client's forwarder had.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        8 << 20,
	})
	s.mu.Lock()
	s.sessions[id] = se
	s.byKey[string(key.Marshal())] = id
	s.mu.Unlock()
	return se, nil
}

// Bindings implements hud.Session.
func (se *session) Bindings() []hud.Binding {
	se.s.mu.Lock()
	addr := se.s.advertise
	se.s.mu.Unlock()
	return []hud.Binding{
		{Name: CapabilityMCP, Protocol: hud.ProtocolMCP, URL: "http://" + addr + "/sessions/" + se.id + "/mcp",
			Params: map[string]any{"transport": "streamable-http", "auth_token": se.token}},
		{Name: CapabilitySSH, Protocol: hud.ProtocolSSH, URL: "ssh://" + addr,
			Params: map[string]any{"user": SSHUser, "host_pubkey": se.s.pub, "client_key": se.pem, "shell": "bash"}},
	}
}

func (se *session) target(context.Context) (shellserve.Target, error) {
	se.mu.Lock()
	defer se.mu.Unlock()
	if se.sb == nil {
		return shellserve.Target{}, errors.New("no task in progress: send tasks.start first")
	}
	return shellserve.Target{Sandbox: se.sb, Dir: se.task.Workdir}, nil
}

// InProgress implements hud.Session.
func (se *session) InProgress() bool {
	se.mu.Lock()
	defer se.mu.Unlock()
	return se.sb != nil
}

// Start implements hud.Session: a sandbox for the task, prepared as a
// trial's environment phase prepares it.
func (se *session) Start(ctx context.Context, id string, args map[string]any) (any, error) {
	t := se.s.tasks[id]
	if t == nil {
		return nil, hud.Errorf(hud.CodeInvalidParams, "unknown task: %s", hud.Repr(id))
	}
	if len(args) > 0 {
		return nil, hud.Errorf(hud.CodeInvalidParams, "task %s takes no args", hud.Repr(id))
	}
	if err := se.Cancel(ctx); err != nil {
		return nil, err
	}
	if err := se.s.reserve(); err != nil {
		return nil, err
	}
	sb, err := se.create(ctx, t)
	if err != nil {
		se.s.release()
		return nil, err
	}
	se.mu.Lock()
	se.task, se.sb = t, sb
	se.mu.Unlock()
	se.s.event(Event{Session: se.id, Task: t.Name, Sandbox: sb.ID()})
	return map[string]any{"prompt": t.Instruction}, nil
}

func (se *session) create(ctx context.Context, t *task.Task) (*sandbox.Sandbox, error) {
	if t.BuildTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.BuildTimeout)
		defer cancel()
	}
	spec := trial.TaskSpec(t, trial.Overrides{})
	spec.TTL = se.s.ttl(t)
	var run [6]byte
	_, _ = rand.Read(run[:])
	spec.Labels = map[string]string{
		trial.LabelLauncher: LabelLauncher,
		trial.LabelTask:     trial.LabelValue(t.Name),
		trial.LabelTrial:    "hud-" + hex.EncodeToString(run[:]),
	}
	p := se.s.o.Provider
	if err := p.PrepareImage(ctx, spec); err != nil {
		return nil, err
	}
	sb, err := p.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	if err := trial.Prepare(ctx, sb, t); err != nil {
		se.s.remove(sb)
		return nil, err
	}
	return sb, nil
}

// ttl is the sandbox's provider-side lifetime: the task's limits, the
// heartbeat window and the provider's margin, so that a server that dies
// still leaves nothing running for long. A task without limits gets a day.
func (s *Server) ttl(t *task.Task) time.Duration {
	if t.AgentTimeout <= 0 || t.VerifierTimeout <= 0 {
		return 24 * time.Hour
	}
	win := s.o.Limits.HeartbeatWindow
	if win <= 0 {
		win = hud.DefaultHeartbeatWindow
	}
	return t.BuildTimeout + t.AgentTimeout + t.VerifierTimeout + win + s.o.TTLMargin + time.Minute
}

// take ends the task in progress, handing back its sandbox.
func (se *session) take() (*task.Task, *sandbox.Sandbox) {
	se.mu.Lock()
	defer se.mu.Unlock()
	t, sb := se.task, se.sb
	se.task, se.sb = nil, nil
	return t, sb
}

// Grade implements hud.Session: the task's verifier, then the sandbox is
// deleted (after the reply).
func (se *session) Grade(ctx context.Context, params map[string]any) (any, error) {
	t, sb := se.take()
	if sb == nil {
		return nil, hud.Errorf(hud.CodeInvalidRequest, "no task in progress")
	}
	se.bg.Add(1)
	defer func() {
		go func() {
			defer se.bg.Done()
			se.s.destroy(se.id, t, sb)
		}()
	}()
	if err := writeAnswer(ctx, sb, params["answer"]); err != nil {
		return nil, err
	}
	rewards, err := trial.Verify(ctx, sb, t, t.VerifierTimeout, nil)
	if err != nil {
		switch kind := trial.KindOf(err); kind {
		case trial.VerifierTimeout, trial.RewardFileNotFound, trial.RewardFileEmpty, trial.VerifierOutputParse:
			// No verdict: HUD's Harbor adapter grades this 0 with isError.
			msg := err.Error()
			return &hud.Grade{Done: true, Content: &msg, IsError: true, Info: map[string]any{"exception_type": string(kind)}}, nil
		}
		return nil, err
	}
	return &hud.Grade{Score: layout.MainReward(rewards), Done: true, Info: map[string]any{"rewards": rewards}}, nil
}

func writeAnswer(ctx context.Context, sb *sandbox.Sandbox, answer any) error {
	var b []byte
	switch a := answer.(type) {
	case nil:
	case string:
		b = []byte(a)
	default:
		var err error
		if b, err = json.Marshal(a); err != nil {
			return err
		}
	}
	return sb.WriteFile(ctx, AnswerFile, b, 0o644)
}

// Cancel implements hud.Session. It returns once the session holds no
// sandbox, a graded one's deletion included, so that bye's reply means the
// sandbox is gone and the session's next start fits under the limit.
func (se *session) Cancel(context.Context) error {
	t, sb := se.take()
	if sb != nil {
		se.s.destroy(se.id, t, sb)
	}
	se.bg.Wait()
	return nil
}

// Close implements hud.Session: the session's sandbox is deleted and its
// credentials stop working.
func (se *session) Close(ctx context.Context) {
	_ = se.Cancel(ctx)
	s := se.s
	s.mu.Lock()
	delete(s.sessions, se.id)
	delete(s.byKey, string(se.key.Marshal()))
	s.mu.Unlock()
}

// destroy deletes a session's sandbox; it survives the caller's
// cancellation (Sandbox.Delete does) and is bounded.
func (s *Server) destroy(session string, t *task.Task, sb *sandbox.Sandbox) {
	s.remove(sb)
	s.release()
	s.event(Event{Session: session, Task: t.Name, Sandbox: sb.ID(), Deleted: true})
}

func (s *Server) remove(sb *sandbox.Sandbox) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := sandbox.IgnoreNotFound(sb.Delete(ctx)); err != nil {
		s.log.Warn("hud: deleting sandbox", "sandbox", sb.ID(), "err", err)
	}
	_ = sb.Close()
}
