// Package shellserve offers a sandbox's shell to agents as two capabilities: an
// MCP server (github.com/modelcontextprotocol/go-sdk) with a bash tool and
// file tools, and an SSH server (golang.org/x/crypto/ssh) whose sessions
// run through the sandbox API. Neither touches the host: every command and
// file operation is a call on the sandbox a TargetFunc names at the time
// of the call.
//
// The SSH server runs exec requests and a shell (bash, else sh) with the
// client's stdin, stdout, stderr and exit-status; the sandbox API has no
// terminals, so pty-req is refused (OpenSSH goes on without one). Port
// forwarding (tcpip-forward, direct-tcpip), subsystems (sftp), env,
// agent and X11 forwarding are refused, so a key reaches the sandbox's
// commands and nothing else.
//
// Import it from HUD's hosted server (hud/hudserve) and other connectors
// that hand an agent a shell.
package shellserve
