package k8s

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// watcher is the one informer of a process for one kind of object (pods in
// pod mode, SandboxClaims in agent-sandbox mode), API server, credential
// and namespace: every Provider value opened on them shares it, so
// readiness, List and the reaper read its cache and never poll the API
// server per sandbox. It watches only objects labelled labelManaged.
type watcher[T metav1.Object] struct {
	key  string
	ns   string
	refs int
	stop chan struct{}
	inf  cache.SharedIndexInformer

	mu      sync.Mutex
	changed map[string]chan struct{} // closed and replaced when that object changes
}

var watchers = struct {
	sync.Mutex
	m map[string]any
}{m: map[string]any{}}

// watcherKey tells configs apart by kind, server, namespace and who is
// asking: two credentials may see different objects (RBAC), so they never
// share.
func watcherKey(kind string, cfg *rest.Config, ns string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%s\x00%x\x00%s\x00%s\x00%s", kind, cfg.Host, ns, cfg.BearerToken, cfg.BearerTokenFile,
		cfg.CertData, cfg.CertFile, cfg.Username, cfg.Impersonate.UserName)
	return hex.EncodeToString(h.Sum(nil))
}

// managedOnly is the informers' list and watch selector.
func managedOnly(o *metav1.ListOptions) { o.LabelSelector = labelManaged + "=true" }

// acquireWatcher returns the process's watcher of kind for cfg and ns,
// starting it with the informer newInformer makes on first use. release
// gives it back; the last release stops it.
func acquireWatcher[T metav1.Object](ctx context.Context, kind string, cfg *rest.Config, ns string, newInformer func() cache.SharedIndexInformer) (*watcher[T], error) {
	key := watcherKey(kind, cfg, ns)
	watchers.Lock()
	var w *watcher[T]
	if got, ok := watchers.m[key]; ok {
		w = got.(*watcher[T])
	} else {
		w = &watcher[T]{key: key, ns: ns, stop: make(chan struct{}), changed: map[string]chan struct{}{}, inf: newInformer()}
		_, _ = w.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { w.notify(o) },
			UpdateFunc: func(_, o any) { w.notify(o) },
			DeleteFunc: func(o any) { w.notify(o) },
		})
		go w.inf.Run(w.stop)
		watchers.m[key] = w
	}
	w.refs++
	watchers.Unlock()
	if !cache.WaitForCacheSync(ctx.Done(), w.inf.HasSynced) {
		w.release()
		return nil, classify(ctx.Err(), "sync the "+kind+" informer")
	}
	return w, nil
}

func (w *watcher[T]) release() {
	watchers.Lock()
	defer watchers.Unlock()
	w.refs--
	if w.refs == 0 {
		close(w.stop)
		delete(watchers.m, w.key)
	}
}

func (w *watcher[T]) notify(o any) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	m, ok := o.(metav1.Object)
	if !ok {
		return
	}
	w.mu.Lock()
	if ch, ok := w.changed[m.GetName()]; ok {
		close(ch)
		delete(w.changed, m.GetName())
	}
	w.mu.Unlock()
}

// next returns a channel closed at the next change of the named object.
// Take it before reading the cache, so no change falls between.
func (w *watcher[T]) next(name string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch, ok := w.changed[name]
	if !ok {
		ch = make(chan struct{})
		w.changed[name] = ch
	}
	return ch
}

// get reads the named object from the cache; the zero T (nil) when it is
// not there.
func (w *watcher[T]) get(name string) T {
	var zero T
	o, ok, err := w.inf.GetIndexer().GetByKey(w.ns + "/" + name)
	if err != nil || !ok {
		return zero
	}
	t, ok := o.(T)
	if !ok {
		return zero
	}
	return t
}

// list returns every object in the cache.
func (w *watcher[T]) list() []T {
	objs := w.inf.GetIndexer().List()
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// until waits for check to say done about the named object (nil when the
// cache has none), re-checking at each change of it, and at least every
// recheck in case a change was coalesced away.
func (w *watcher[T]) until(ctx context.Context, name string, check func(T) (bool, error)) error {
	const recheck = 5 * time.Second
	t := time.NewTimer(recheck)
	defer t.Stop()
	for {
		ch := w.next(name)
		done, err := check(w.get(name))
		if done || err != nil {
			return err
		}
		select {
		case <-ch:
		case <-t.C:
			t.Reset(recheck)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
