package shellserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/berth-sh/berth/sandbox"
)

// SSHOptions configure an SSH server.
type SSHOptions struct {
	HostKey ssh.Signer
	// Authorize maps a user and a public key to the session they open;
	// ok false refuses the key. Only public keys are accepted.
	Authorize func(user string, key ssh.PublicKey) (session string, ok bool)
	// Target finds the session's sandbox when a command starts.
	Target func(ctx context.Context, session string) (Target, error)
	// HandshakeTimeout bounds the SSH handshake and authentication; 10 s.
	HandshakeTimeout time.Duration
	// MaxChannels bounds the session channels open at once on one
	// connection; 16.
	MaxChannels int
	Logger      *slog.Logger
}

// SSHServer serves SSH connections handed to it (from tunnels).
type SSHServer struct {
	o   SSHOptions
	cfg *ssh.ServerConfig
}

// sessionKey is where the authorized session travels in ssh.Permissions.
const sessionKey = "berth-session"

// NewSSH makes an SSH server.
func NewSSH(o SSHOptions) *SSHServer {
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 10 * time.Second
	}
	if o.MaxChannels <= 0 {
		o.MaxChannels = 16
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	cfg := &ssh.ServerConfig{
		ServerVersion: "SSH-2.0-berth",
		MaxAuthTries:  6,
		PublicKeyCallback: func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			id, ok := o.Authorize(meta.User(), key)
			if !ok {
				return nil, errors.New("key not authorized")
			}
			return &ssh.Permissions{Extensions: map[string]string{sessionKey: id}}, nil
		},
	}
	cfg.AddHostKey(o.HostKey)
	return &SSHServer{o: o, cfg: cfg}
}

// ServeConn runs one SSH connection until it ends or ctx does.
func (s *SSHServer) ServeConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	_ = c.SetDeadline(time.Now().Add(s.o.HandshakeTimeout))
	sc, chans, reqs, err := ssh.NewServerConn(c, s.cfg)
	if err != nil {
		s.o.Logger.Debug("ssh: handshake refused", "err", err)
		return
	}
	_ = c.SetDeadline(time.Time{})
	defer sc.Close()
	// Global requests are port forwarding (tcpip-forward) and keepalives:
	// every one is answered no.
	go ssh.DiscardRequests(reqs)
	session := sc.Permissions.Extensions[sessionKey]
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, s.o.MaxChannels)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.Prohibited, "only session channels: no port forwarding")
			continue
		}
		select {
		case slots <- struct{}{}:
		default:
			_ = nc.Reject(ssh.ResourceShortage, "too many sessions on this connection")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			<-slots
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			s.channel(ctx, session, ch, creqs)
		}()
	}
	cancel()
}

// channel serves one session channel: at most one exec or shell.
func (s *SSHServer) channel(ctx context.Context, session string, ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	// A channel that ends, however, ends its command (sshd hangs up on it).
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	started := false
	defer func() {
		cancel()
		if started {
			<-done
		}
	}()
	var proc struct {
		sync.Mutex
		p *sandbox.Process
	}
	for {
		select {
		case req, ok := <-reqs:
			if !ok {
				return
			}
			switch req.Type {
			case "exec", "shell":
				if started {
					_ = req.Reply(false, nil)
					continue
				}
				args := interactive()
				if req.Type == "exec" {
					var p struct{ Command string }
					if err := ssh.Unmarshal(req.Payload, &p); err != nil {
						_ = req.Reply(false, nil)
						continue
					}
					args = bashOrSh(p.Command)
				}
				started = true
				_ = req.Reply(true, nil)
				go func() {
					defer close(done)
					s.run(ctx, session, ch, args, func(p *sandbox.Process) {
						proc.Lock()
						proc.p = p
						proc.Unlock()
					})
				}()
			case "signal":
				var p struct{ Signal string }
				proc.Lock()
				pr := proc.p
				proc.Unlock()
				if ssh.Unmarshal(req.Payload, &p) != nil || pr == nil {
					_ = req.Reply(false, nil)
					continue
				}
				_ = req.Reply(pr.Signal(ctx, sandbox.Signal("SIG"+p.Signal)) == nil, nil)
			default:
				// pty-req (no terminals in the sandbox API), env (no
				// injection into the sandbox's commands), subsystem (no
				// sftp), x11-req, auth-agent-req, window-change.
				_ = req.Reply(false, nil)
			}
		case <-done:
			return
		case <-ctx.Done():
			return
		}
	}
}

// run runs args in the session's sandbox with the channel as its stdio,
// then reports exit-status and closes the channel.
func (s *SSHServer) run(ctx context.Context, session string, ch ssh.Channel, args []string, started func(*sandbox.Process)) {
	code := s.exec(ctx, session, ch, args, started)
	_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(code)}))
	_ = ch.CloseWrite()
	_ = ch.Close()
}

func (s *SSHServer) exec(ctx context.Context, session string, ch ssh.Channel, args []string, started func(*sandbox.Process)) int {
	t, err := s.o.Target(ctx, session)
	if err != nil {
		fmt.Fprintf(ch.Stderr(), "berth: %v\n", err)
		return 255
	}
	p, err := t.Sandbox.Exec(ctx, sandbox.Command{Args: args, Dir: t.Dir, Stdin: ch, Stdout: ch, Stderr: ch.Stderr()})
	if err != nil {
		fmt.Fprintf(ch.Stderr(), "berth: %v\n", err)
		return 255
	}
	started(p)
	code, err := p.Wait(ctx)
	if err != nil {
		// The connection went away: the command must not run on.
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_ = p.Signal(kctx, sandbox.SIGKILL)
		cancel()
		fmt.Fprintf(ch.Stderr(), "berth: %v\n", err)
		return 255
	}
	return code
}
