package rest

import "strings"

// RedactedMark replaces a secret in text.
const RedactedMark = "[redacted]"

// minSecret is the shortest secret worth redacting: shorter ones would
// garble every message and hide nothing.
const minSecret = 4

// Redact removes the client's secrets from s: a server or proxy that
// echoes the credential must not put it in an error.
func (c *Client) Redact(s string) string { return Redact(s, c.o.Secrets()...) }

// Redact removes secrets from s.
func Redact(s string, secrets ...string) string {
	for _, sec := range secrets {
		if len(sec) >= minSecret {
			s = strings.ReplaceAll(s, sec, RedactedMark)
		}
	}
	return s
}

// Scrub keeps the client's secrets out of err's text; see the function
// Scrub.
func (c *Client) Scrub(err error) error { return Scrub(err, c.o.Secrets()...) }

// Scrub returns err printing with the secrets removed, when its text holds
// one; the cause stays reachable for errors.Is and errors.As (classes
// included).
func Scrub(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, s := range secrets {
		if len(s) >= minSecret && strings.Contains(msg, s) {
			return &scrubbed{err: err, secrets: secrets}
		}
	}
	return err
}

// scrubbed prints its cause with the secrets removed.
type scrubbed struct {
	err     error
	secrets []string
}

func (e *scrubbed) Error() string { return Redact(e.err.Error(), e.secrets...) }
func (e *scrubbed) Unwrap() error { return e.err }
