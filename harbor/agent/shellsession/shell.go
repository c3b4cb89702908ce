package shellsession

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/berth-sh/berth/sandbox"
)

// Session is a persistent shell in a sandbox. It is not safe for
// concurrent use: one agent drives it.
type Session interface {
	// Kind is "tmux" or "pipe".
	Kind() string
	// Send types keys: literal text (a trailing newline is Enter), or
	// exactly one key name (see Keys). After a line or an interrupt it
	// returns once the shell is idle again, or when wait has passed; after
	// other keys, when wait has passed. idle reports whether the shell is
	// back at its prompt. A key it cannot send is ErrKey.
	Send(ctx context.Context, keys string, wait time.Duration) (idle bool, err error)
	// Output is what the terminal showed since the last call, at most
	// Options.MaxOutput bytes.
	Output(ctx context.Context) (string, error)
	// Close ends the shell; it is idempotent and survives ctx's end.
	Close(ctx context.Context) error
}

// Options configure Open.
type Options struct {
	// Mode is "auto" (tmux when the sandbox has it), "tmux" or "pipe".
	Mode string
	// Dir is the shell's working directory; "" is the sandbox's.
	Dir string
	// Env is added to the shell's environment.
	Env map[string]string
	// Width and Height of the tmux window (default 200 x 50).
	Width, Height int
	// MaxOutput bounds what Output returns (default 16 KiB).
	MaxOutput int
}

// Key names Send understands in place of literal text, as tmux names
// them. Without tmux only Enter, Tab, Escape and C-c work.
var Keys = []string{"Enter", "Tab", "Escape", "BSpace", "Up", "Down", "Left", "Right", "Home", "End", "PageUp", "PageDown",
	"C-a", "C-b", "C-c", "C-d", "C-e", "C-k", "C-l", "C-r", "C-u", "C-w", "C-z", "C-\\"}

// ErrKey is a key the session cannot send (a control key without tmux).
var ErrKey = errors.New("key not available")

// IsKey reports whether s is one key name.
func IsKey(s string) bool {
	for _, k := range Keys {
		if s == k {
			return true
		}
	}
	return false
}

// Open starts a shell session in sb.
func Open(ctx context.Context, sb *sandbox.Sandbox, o Options) (Session, error) {
	if o.Width <= 0 {
		o.Width = 200
	}
	if o.Height <= 0 {
		o.Height = 50
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = 16 << 10
	}
	switch o.Mode {
	case "", "auto":
		// The pipe shell asks whether tmux is there: no exec of its own for
		// the question (a round trip on remote providers).
		p, err := openPipe(ctx, sb, o)
		if err != nil {
			return nil, err
		}
		has, err := p.succeeds(ctx, "command -v tmux >/dev/null 2>&1")
		if err != nil || !has {
			return p, err
		}
		p.Close(ctx)
		return openTmux(ctx, sb, o)
	case "tmux":
		return openTmux(ctx, sb, o)
	case "pipe":
		return openPipe(ctx, sb, o)
	}
	return nil, sandbox.Errorf(sandbox.InvalidArgument, "shell mode %q: want auto, tmux or pipe", o.Mode)
}

func nonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Clip keeps the head and the tail of s within max bytes, on rune and
// preferably line boundaries, and says how much of the middle it left out.
func Clip(s string, max int) string {
	if len(s) <= max || max <= 0 {
		return s
	}
	half := max / 2
	head, tail := s[:runeStart(s, half)], s[runeStart(s, len(s)-half):]
	if i := strings.LastIndexByte(head, '\n'); i > half/2 {
		head = head[:i+1]
	}
	if i := strings.IndexByte(tail, '\n'); i >= 0 && i < half/2 {
		tail = tail[i+1:]
	}
	return fmt.Sprintf("%s\n[... output limited to %d bytes; %d bytes in the middle omitted ...]\n%s", head, max, len(s)-len(head)-len(tail), tail)
}

func runeStart(s string, i int) int {
	for i > 0 && i < len(s) && s[i]&0xC0 == 0x80 {
		i--
	}
	return i
}
