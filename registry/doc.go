// Package registry holds one entry per sandbox provider, as data: its
// credential (key variables, the path-valued file variable a launcher
// forwards instead of the secret, the default key path, the provision hint),
// the addresses that are safe to forward, runtime defaults, the target line,
// the host pieces it needs, its capabilities, and the factory that opens it.
// No code outside an entry branches on which provider it has.
//
// A Registry is a type with a default instance, Default; package builtin
// fills it with the providers the berth binary ships.
//
// Credentials are supplied on the launcher side and resolved on the worker
// side, with this precedence (the facts file miles-sandbox-layer.md is the
// specification, error texts included):
//
// Launcher side (Supply), file first:
//  1. the key file is the explicit path (a --key-file flag, or the entry's
//     file variable set in the launcher's environment), else the default path;
//  2. a readable, non-empty file is supplied by forwarding FILE_VAR=<path>,
//     never its contents;
//  3. an explicit path that is missing or empty is an error;
//  4. else, when every key variable is set, the workers are assumed to have
//     them and nothing is forwarded;
//  5. else the "needs credentials" error with the provision hint.
//
// Worker side (Resolve), environment first: every key variable when all are
// set, else the file named by the file variable (or the default path), else
// the "no API key" error. Secrets are returned as Secret values, which never
// print their contents.
//
// A key file that others can read or write (any group or world bit) draws
// a warning by default, on both sides: Launch adds it to its notes and
// Open logs it, naming the file, its mode and chmod 600, never the key.
// With BERTH_STRICT_KEY_FILES=1 it is refused instead (Unauthenticated),
// and Launch forwards the switch so that workers refuse it too. Why a
// warning and not a refusal by default: the files are not berth's own.
// ~/.modal.toml is written by `modal token new` with the user's umask
// (0644 on most systems), and on a cluster the key file is often on a
// shared file system that workers running as another user of the same
// group must read; refusing would break setups that are safe where they
// run (a single-user machine). Where the host is shared with users who must
// not have the key, turn strict mode on. berth serve's own API key file,
// which berth creates (mode 0600), is always refused when others can read
// it (package internal/apikeys).
package registry
