package registry

import (
	"fmt"
	"io"
	"log/slog"
)

// Secret is a credential value. Every way of printing it (fmt verbs, JSON,
// text, slog) yields a placeholder; only Reveal returns the contents, and
// only a driver passing it to its API should call it.
type Secret string

const redacted = "[redacted]"

// Reveal returns the secret's contents.
func (s Secret) Reveal() string { return string(s) }

func (s Secret) String() string   { return redacted }
func (s Secret) GoString() string { return redacted }

// MarshalText keeps the secret out of JSON, YAML and text encodings.
func (s Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// LogValue keeps the secret out of structured logs.
func (s Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// Format prints the placeholder for every verb, %d and %x included, so no
// format string can reach the contents.
func (s Secret) Format(f fmt.State, verb rune) { io.WriteString(f, redacted) }
