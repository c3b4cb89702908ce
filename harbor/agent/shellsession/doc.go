// Package shellsession is a persistent shell session in a sandbox, driven only
// through the sandbox API: what a host-process LLM agent types into and
// reads from, so that cd, exported variables and background jobs carry
// over from one command to the next as in a terminal.
//
// Two kinds, chosen by Open:
//
//   - tmux, when the sandbox has it: a detached tmux session on a socket
//     of its own; keys go in with send-keys (literal text, or key names
//     such as C-c), the screen comes back with capture-pane. After a line
//     the session types a hidden `tmux wait -S <channel>` and Send blocks
//     on `tmux wait <channel>`, so it returns as soon as the command is
//     done, or at the caller's wait.
//   - pipe, everywhere else: one long-lived sh (bash when the image has
//     it) whose stdin is fed by Send and whose output streams back through
//     the sandbox's exec. After a line Send writes a printf of a marker
//     (a random nonce, a sequence number and $?) and returns when the
//     marker comes back. There is no terminal: C-c interrupts the shell's
//     children, other control keys are refused, full-screen programs do
//     not work, and a program that reads stdin reads what is typed next.
//     A shell that exits (exit typed) is started again, and Output says so.
//
// Output is what the terminal showed since the last call, bounded (the
// head and tail are kept, the middle counted), with the markers taken out.
//
// Who imports it: LLM agents (harbor/agent/terminus).
package shellsession
