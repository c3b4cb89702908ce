package k8s

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// KeySecret is the Secret, one per namespace, whose "key" derives every
// sandbox's access token there: token = HMAC-SHA256(key, pod name). The pod
// holds only the token's hash, so reading pods reveals nothing, and any
// process allowed to get this one Secret reattaches to a sandbox from its
// name alone, with no per-sandbox Secret (no API call per sandbox).
const KeySecret = "berth-sandbox-key"

const keyField = "key"

// keyring loads the namespace's key once per process.
type keyring struct {
	p    *Provider
	mu   sync.Mutex
	key  []byte
	done bool
}

// get returns the key, reading the Secret on first use and creating it
// when the namespace has none (AlreadyExists from a racing process reads
// the winner's).
func (k *keyring) get(ctx context.Context) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.done {
		return k.key, nil
	}
	if len(k.p.opts.TokenKey) > 0 {
		k.key, k.done = k.p.opts.TokenKey, true
		return k.key, nil
	}
	secrets := k.p.cs.CoreV1().Secrets(k.p.opts.Namespace)
	for range 3 {
		s, err := secrets.Get(ctx, KeySecret, metav1.GetOptions{})
		if err == nil {
			if b := s.Data[keyField]; len(b) >= 32 {
				k.key, k.done = b, true
				return b, nil
			}
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "k8s: secret %s/%s has no %q of 32 bytes or more", k.p.opts.Namespace, KeySecret, keyField)
		}
		if !apierrors.IsNotFound(err) {
			return nil, classify(err, "read the sandbox key secret")
		}
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: KeySecret, Labels: map[string]string{labelManaged: "true"}},
			Data:       map[string][]byte{keyField: key},
		}, metav1.CreateOptions{})
		if err == nil {
			k.key, k.done = key, true
			return key, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, classify(err, "create the sandbox key secret")
		}
	}
	return nil, errdefs.Errorf(errdefs.Unavailable, "k8s: the sandbox key secret keeps changing")
}

// token derives the access token of the sandbox named name.
func token(key []byte, name string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(name))
	return hex.EncodeToString(m.Sum(nil))
}
