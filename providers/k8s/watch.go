package k8s

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// watcher is the one pod informer of a process for one API server,
// credential and namespace: every Provider value opened on them shares it,
// so readiness, List and the reaper read its cache and never poll the API
// server per sandbox. It watches only pods labelled labelManaged.
type watcher struct {
	key    string
	refs   int
	stop   chan struct{}
	lister listersv1.PodNamespaceLister
	synced cache.InformerSynced

	mu      sync.Mutex
	changed map[string]chan struct{} // closed and replaced when that pod changes
}

var watchers = struct {
	sync.Mutex
	m map[string]*watcher
}{m: map[string]*watcher{}}

// watcherKey tells configs apart by server, namespace and who is asking:
// two credentials may see different pods (RBAC), so they never share.
func watcherKey(cfg *rest.Config, ns string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%x\x00%s\x00%s\x00%s", cfg.Host, ns, cfg.BearerToken, cfg.BearerTokenFile,
		cfg.CertData, cfg.CertFile, cfg.Username, cfg.Impersonate.UserName)
	return hex.EncodeToString(h.Sum(nil))
}

// acquireWatcher returns the process's watcher for cfg and ns, starting it
// on first use. release gives it back; the last release stops it.
func acquireWatcher(ctx context.Context, cs kubernetes.Interface, cfg *rest.Config, ns string) (*watcher, error) {
	key := watcherKey(cfg, ns)
	watchers.Lock()
	w, ok := watchers.m[key]
	if !ok {
		w = &watcher{key: key, stop: make(chan struct{}), changed: map[string]chan struct{}{}}
		f := informers.NewSharedInformerFactoryWithOptions(cs, 0,
			informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = labelManaged + "=true" }),
			informers.WithTransform(trimPod))
		inf := f.Core().V1().Pods()
		_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { w.notify(o) },
			UpdateFunc: func(_, o any) { w.notify(o) },
			DeleteFunc: func(o any) { w.notify(o) },
		})
		w.lister = inf.Lister().Pods(ns)
		w.synced = inf.Informer().HasSynced
		f.Start(w.stop)
		watchers.m[key] = w
	}
	w.refs++
	watchers.Unlock()
	if !cache.WaitForCacheSync(ctx.Done(), w.synced) {
		w.release()
		return nil, classify(ctx.Err(), "sync the pod informer")
	}
	return w, nil
}

func (w *watcher) release() {
	watchers.Lock()
	defer watchers.Unlock()
	w.refs--
	if w.refs == 0 {
		close(w.stop)
		delete(watchers.m, w.key)
	}
}

// trimPod drops what berth never reads, to keep a 10,000-pod cache small.
func trimPod(o any) (any, error) {
	if p, ok := o.(*corev1.Pod); ok {
		p.ManagedFields = nil
		p.Spec.Volumes = nil
		p.Spec.InitContainers = nil
		for i := range p.Spec.Containers {
			p.Spec.Containers[i].Env = nil
		}
	}
	return o, nil
}

func (w *watcher) notify(o any) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	if ch, ok := w.changed[p.Name]; ok {
		close(ch)
		delete(w.changed, p.Name)
	}
	w.mu.Unlock()
}

// next returns a channel closed at the next change of the named pod. Take
// it before reading the cache, so no change falls between.
func (w *watcher) next(name string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch, ok := w.changed[name]
	if !ok {
		ch = make(chan struct{})
		w.changed[name] = ch
	}
	return ch
}

// get reads the named pod from the cache; nil when it is not there.
func (w *watcher) get(name string) *corev1.Pod {
	p, err := w.lister.Get(name)
	if err != nil {
		return nil
	}
	return p
}

// until waits for check to say done about the named pod (nil when the
// cache has none), re-checking at each change of it, and at least every
// recheck in case a change was coalesced away.
func (w *watcher) until(ctx context.Context, name string, check func(*corev1.Pod) (bool, error)) error {
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
