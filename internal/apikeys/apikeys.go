package apikeys

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Bounds on a key file.
const (
	MinKeyLen   = 16
	MaxKeyLen   = 512
	MaxKeys     = 10_000
	maxFileSize = 4 << 20
)

// Prefix starts every generated key, so that a leaked one is easy to grep.
const Prefix = "berth_"

// Keyring is a set of accepted keys. It is safe for concurrent use.
type Keyring struct {
	keys []key
}

type key struct {
	secret []byte
	id     string
}

// ID is a key's identity, which owns its sandboxes and names it in logs:
// "key-" and the whole SHA-256 of the key in hex. A prefix of the hash
// would let two keys share an owner (32 bits collide after some 77,000
// keys, and an attacker can search for a key that collides with another);
// the whole hash does not. It reveals nothing usable about the key.
func ID(k string) string {
	sum := sha256.Sum256([]byte(k))
	return "key-" + hex.EncodeToString(sum[:])
}

// New builds a keyring from keys (for tests and embedding).
func New(keys ...string) (*Keyring, error) {
	kr := &Keyring{}
	for i, k := range keys {
		if err := checkKey(k); err != nil {
			return nil, fmt.Errorf("key %d: %w", i+1, err)
		}
		kr.keys = append(kr.keys, key{secret: []byte(k), id: ID(k)})
	}
	if len(kr.keys) == 0 {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "no API key given")
	}
	return kr, nil
}

func checkKey(k string) error {
	switch {
	case len(k) < MinKeyLen:
		return errdefs.Errorf(errdefs.InvalidArgument, "an API key must be at least %d characters", MinKeyLen)
	case len(k) > MaxKeyLen:
		return errdefs.Errorf(errdefs.InvalidArgument, "an API key must be at most %d characters", MaxKeyLen)
	case strings.ContainsFunc(k, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return errdefs.Errorf(errdefs.InvalidArgument, "an API key must not contain spaces or control characters")
	}
	return nil
}

// Len is the number of keys.
func (kr *Keyring) Len() int { return len(kr.keys) }

// Check reports whether presented is one of the keys, and its ID. Every key
// is compared in constant time and none is skipped, so the time taken says
// nothing about which key came close.
func (kr *Keyring) Check(presented string) (id string, ok bool) {
	p := []byte(presented)
	for _, k := range kr.keys {
		if subtle.ConstantTimeCompare(p, k.secret) == 1 {
			id, ok = k.id, true
		}
	}
	return id, ok
}

// Derive returns HMAC-SHA256(the secret of the key whose ID is id, msg) in
// hex, and false when no key has that ID. berth serve's replicas, which
// share the key file and nothing else, derive each sandbox's access token
// this way from its owner's key (the client that holds the key may get the
// token anyway); the token reveals nothing of the key.
func (kr *Keyring) Derive(id, msg string) (string, bool) {
	for _, k := range kr.keys {
		if k.id == id {
			m := hmac.New(sha256.New, k.secret)
			m.Write([]byte(msg))
			return hex.EncodeToString(m.Sum(nil)), true
		}
	}
	return "", false
}

// Load reads a key file: one key per line; blank lines and lines starting
// with '#' are skipped. A file that others can read or write is refused,
// as ssh refuses such a private key.
func Load(path string) (*Keyring, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errdefs.Errorf(errdefs.NotFound, "API key file %s: %w", path, err)
		}
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "API key file %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "API key file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "API key file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "API key file %s has mode %04o: others may read it; run chmod 600 %s", path, perm, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "API key file %s: %w", path, err)
	}
	if len(data) > maxFileSize {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "API key file %s is over %d bytes", path, maxFileSize)
	}
	var keys []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxFileSize)
	for line := 1; sc.Scan(); line++ {
		k := strings.TrimSpace(sc.Text())
		if k == "" || strings.HasPrefix(k, "#") {
			continue
		}
		if err := checkKey(k); err != nil {
			// The line number, never the line: it may be a near-miss key.
			return nil, fmt.Errorf("API key file %s, line %d: %w", path, line, err)
		}
		if len(keys) == MaxKeys {
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "API key file %s has more than %d keys", path, MaxKeys)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "API key file %s holds no key", path)
	}
	return New(keys...)
}

// Generate returns a new random key: Prefix and 40 hex digits.
func Generate() string {
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	return Prefix + hex.EncodeToString(b)
}

// LoadOrCreate loads the key file, or when it does not exist creates it
// (mode 0600, parents 0700) with one generated key, and reports the key
// once to announce. The file is created exclusively, so two servers
// starting together do not overwrite each other's key.
func LoadOrCreate(path string, announce io.Writer) (*Keyring, error) {
	kr, err := Load(path)
	if !errors.Is(err, errdefs.ErrNotFound) {
		return kr, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "API key file %s: %w", path, err)
	}
	k := Generate()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return Load(path) // another process won the race
		}
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "API key file %s: %w", path, err)
	}
	if _, err := fmt.Fprintln(f, k); err != nil {
		f.Close()
		_ = os.Remove(path)
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "API key file %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(path)
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "API key file %s: %w", path, err)
	}
	fmt.Fprintf(announce, "berth serve: created the API key file %s with a new key.\n"+
		"This is the only time it is shown; clients send it as X-API-KEY (E2B_API_KEY):\n\n    %s\n\n", path, k)
	return New(k)
}
