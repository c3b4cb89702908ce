package shellsession

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/retry"
)

type tmux struct {
	sb      *sandbox.Sandbox
	o       Options
	sock    string
	conf    string
	channel string // wait channel prefix; lines holding it are hidden
	sent    int
	seen    int
	prev    string // the last full capture, for what is new
	closed  bool
}

const tmuxSession = "berth"

func openTmux(ctx context.Context, sb *sandbox.Sandbox, o Options) (*tmux, error) {
	n := nonce()
	t := &tmux{sb: sb, o: o, sock: "/tmp/berth-tmux-" + n + ".sock", conf: "/tmp/berth-tmux-" + n + ".conf", channel: "berth-" + n + "-"}
	// Written by a command, not a file call, so that it lands where tmux
	// looks whatever the provider maps.
	res, err := sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", `umask 077; printf 'set -g history-limit 50000\nset -g status off\n' > "$0"`, t.conf}})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("writing the tmux configuration: exit %d: %s", res.ExitCode, res.Stderr)
	}
	if err != nil {
		return nil, err
	}
	args := []string{"new-session", "-d", "-s", tmuxSession, "-x", fmt.Sprint(o.Width), "-y", fmt.Sprint(o.Height)}
	if o.Dir != "" {
		args = append(args, "-c", o.Dir)
	}
	if _, err := t.tmux(ctx, 0, args...); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *tmux) Kind() string { return "tmux" }

// tmux runs one tmux command on the session's server; a non-zero exit is
// an error with tmux's message.
func (t *tmux) tmux(ctx context.Context, timeout time.Duration, args ...string) (string, error) {
	cmd := sandbox.Command{Args: append([]string{"tmux", "-S", t.sock, "-f", t.conf}, args...), Env: t.o.Env, Dir: t.o.Dir, Timeout: timeout}
	res, err := t.sb.Run(ctx, cmd)
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("tmux %s: exit %d: %s", args[0], res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return string(res.Stdout), nil
}

func (t *tmux) Send(ctx context.Context, keys string, wait time.Duration) (bool, error) {
	line := strings.HasSuffix(keys, "\n") || keys == "Enter"
	var err error
	if IsKey(keys) {
		_, err = t.tmux(ctx, 0, "send-keys", "-t", tmuxSession, keys)
	} else {
		_, err = t.tmux(ctx, 0, "send-keys", "-t", tmuxSession, "-l", "--", keys)
	}
	if err != nil {
		return false, err
	}
	interrupt := strings.HasPrefix(keys, "C-") && t.sent > t.seen
	if line {
		t.sent++
	}
	switch {
	case line:
		return t.waitLine(ctx, wait, typeOnce)
	case interrupt:
		return t.waitLine(ctx, wait, typeAgain)
	case t.seen >= t.sent:
		return true, retry.Sleep(ctx, min(wait, 50*time.Millisecond))
	}
	return t.waitLine(ctx, wait, typeNone) // keys for what runs
}

// How waitLine types the wait line.
const (
	typeNone  = iota // already typed
	typeOnce         // after a new line
	typeAgain        // after an interrupt, which may flush what was typed ahead
)

// waitLine waits for the wait line typed after what runs (it runs when
// that is done). After an interrupt the shell may drop what was typed
// ahead, the wait line too, so it is typed again until the wait ends.
func (t *tmux) waitLine(ctx context.Context, wait time.Duration, how int) (bool, error) {
	deadline := time.Now().Add(wait)
	typed := how == typeNone
	retype := how == typeAgain
	for try := 0; ; try++ {
		if !typed || retype {
			if _, err := t.tmux(ctx, 0, "send-keys", "-t", tmuxSession, "-l", "--", fmt.Sprintf(" tmux -S %s wait -S %s%d\n", t.sock, t.channel, t.sent)); err != nil {
				return false, err
			}
			typed = true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false, nil
		}
		per := left
		if retype {
			per = min(left, 100*time.Millisecond<<min(try, 5))
		}
		_, err := t.tmux(ctx, per, "wait-for", fmt.Sprintf("%s%d", t.channel, t.sent))
		switch {
		case err == nil:
			t.seen = t.sent
			return true, nil
		case ctx.Err() != nil:
			return false, ctx.Err()
		case !errors.Is(err, sandbox.ErrDeadlineExceeded):
			return false, err
		}
		if !retype {
			return false, nil // still running at the caller's wait
		}
	}
}

func (t *tmux) Output(ctx context.Context) (string, error) {
	full, err := t.tmux(ctx, 0, "capture-pane", "-p", "-J", "-t", tmuxSession, "-S", "-")
	if err != nil {
		return "", err
	}
	full = t.clean(full)
	var out string
	if rest, ok := since(t.prev, full); ok {
		out = rest
	} else {
		// History scrolled away or the screen was cleared: show the screen.
		screen, err := t.tmux(ctx, 0, "capture-pane", "-p", "-J", "-t", tmuxSession)
		if err != nil {
			return "", err
		}
		out = "[current screen]\n" + t.clean(screen)
	}
	t.prev = full
	return Clip(out, t.o.MaxOutput), nil
}

// since is what full shows after prev: the lines from the first one that
// differs (the prompt line prev ended on is shown again with what was
// typed on it). It fails when prev is not there any more.
func since(prev, full string) (string, bool) {
	if prev == "" {
		return full, true
	}
	pl, fl := strings.SplitAfter(prev, "\n"), strings.SplitAfter(full, "\n")
	k := 0
	for k < len(pl) && k < len(fl) && pl[k] == fl[k] {
		k++
	}
	if k < len(pl)-2 { // more than the last line changed: not a continuation
		return "", false
	}
	return strings.Join(fl[k:], ""), true
}

// clean drops the lines that typed the wait commands and trailing blank
// lines.
func (t *tmux) clean(s string) string {
	lines := strings.Split(s, "\n")
	keep := lines[:0]
	for _, l := range lines {
		if !strings.Contains(l, t.channel) {
			keep = append(keep, strings.TrimRight(l, " "))
		}
	}
	return strings.TrimRight(strings.Join(keep, "\n"), "\n") + "\n"
}

func (t *tmux) Close(ctx context.Context) error {
	if t.closed {
		return nil
	}
	t.closed = true
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, err := t.tmux(cctx, 0, "kill-server")
	_, _ = t.sb.Run(cctx, sandbox.Command{Args: []string{"rm", "-f", t.sock, t.conf}})
	return err
}
