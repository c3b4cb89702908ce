package nodeshim

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/cri-streaming/pkg/streaming/portforward"

	"github.com/berth-sh/berth/internal/httpserve"
	"github.com/berth-sh/berth/sandbox"
)

// Options configure Start.
type Options struct {
	// Client talks to the API server as the node.
	Client kubernetes.Interface
	// Node is the node's name.
	Node string
	// Labels are added to the node's (placement in tests).
	Labels map[string]string
	// TLS serves the kubelet endpoint; the API server must trust it and
	// present a client certificate it verifies.
	TLS *tls.Config
	// Local backs the pods.
	Local *sandbox.Provider
	// Logf logs the shim's events; nil discards them.
	Logf func(format string, args ...any)
}

// Shim is a running node.
type Shim struct {
	o      Options
	ln     net.Listener
	srv    *http.Server
	stop   chan struct{}
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	pods map[k8stypes.UID]*backed
	ips  int
}

// backed is one pod and its sandbox.
type backed struct {
	uid    k8stypes.UID
	ns     string
	name   string
	sb     *sandbox.Sandbox
	pid    int // host pid of the agent, for its network namespace
	ready  chan struct{}
	err    error
	cancel context.CancelFunc
}

// Start registers the node and serves its pods until Stop.
func Start(ctx context.Context, o Options) (*Shim, error) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ln := tls.NewListener(httpserve.Listener(raw), o.TLS)
	s := &Shim{o: o, ln: ln, stop: make(chan struct{}), pods: map[k8stypes.UID]*backed{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/portForward/{ns}/{pod}", s.servePortForward)
	s.srv = httpserve.NewServer(mux, 0)
	go func() { _ = s.srv.Serve(ln) }()
	if err := s.register(ctx); err != nil {
		s.srv.Close()
		return nil, err
	}
	var bctx context.Context
	bctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.heartbeat(bctx) }()
	f := informers.NewSharedInformerFactoryWithOptions(o.Client, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", o.Node).String()
	}))
	inf := f.Core().V1().Pods().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.sync(bctx, obj) },
		UpdateFunc: func(_, obj any) { s.sync(bctx, obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				s.stopPod(p.UID)
			}
		},
	})
	f.Start(s.stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		s.Stop()
		return nil, ctx.Err()
	}
	return s, nil
}

// Stop deletes every sandbox it started and the node.
func (s *Shim) Stop() {
	close(s.stop)
	s.cancel()
	s.srv.Close()
	s.mu.Lock()
	uids := make([]k8stypes.UID, 0, len(s.pods))
	for u := range s.pods {
		uids = append(uids, u)
	}
	s.mu.Unlock()
	for _, u := range uids {
		s.stopPod(u)
	}
	s.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.o.Client.CoreV1().Nodes().Delete(ctx, s.o.Node, metav1.DeleteOptions{})
}

// Backed is how many pods have a live sandbox.
func (s *Shim) Backed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pods)
}

func (s *Shim) register(ctx context.Context) error {
	port := s.ln.Addr().(*net.TCPAddr).Port
	labels := map[string]string{"kubernetes.io/hostname": s.o.Node, "kubernetes.io/os": "linux", "berth.sh/node-shim": "true"}
	for k, v := range s.o.Labels {
		labels[k] = v
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse("1000"), corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: s.o.Node, Labels: labels},
	}
	got, err := s.o.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		got, err = s.o.Client.CoreV1().Nodes().Get(ctx, s.o.Node, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("register node: %w", err)
	}
	got.Status = corev1.NodeStatus{
		Capacity: capacity, Allocatable: capacity,
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: s.o.Node}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(port)}},
		Conditions:      []corev1.NodeCondition{readyCondition()},
		NodeInfo:        corev1.NodeSystemInfo{KubeletVersion: "v1.37.2-berth-shim", OperatingSystem: "linux", Architecture: runtime.GOARCH, ContainerRuntimeVersion: "berth-local://0"},
	}
	if _, err := s.o.Client.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node status: %w", err)
	}
	return s.renewLease(ctx)
}

func readyCondition() corev1.NodeCondition {
	now := metav1.Now()
	return corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "berth node shim", LastHeartbeatTime: now, LastTransitionTime: now}
}

func (s *Shim) renewLease(ctx context.Context) error {
	leases := s.o.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	dur := int32(40)
	l, err := leases.Get(ctx, s.o.Node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: s.o.Node},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &s.o.Node, LeaseDurationSeconds: &dur, RenewTime: &now},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec.RenewTime = &now
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// heartbeat renews the lease every 10 s and the Ready condition every 30 s,
// so that the node lifecycle controller never taints the node.
func (s *Shim) heartbeat(ctx context.Context) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.renewLease(ctx); err != nil && ctx.Err() == nil {
			s.o.Logf("node shim: lease: %v", err)
		}
		if n++; n%3 == 0 {
			if node, err := s.o.Client.CoreV1().Nodes().Get(ctx, s.o.Node, metav1.GetOptions{}); err == nil {
				node.Status.Conditions = []corev1.NodeCondition{readyCondition()}
				_, _ = s.o.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
			}
		}
	}
}

// sync reacts to a pod of this node: back a new one, stop a deleted one.
func (s *Shim) sync(ctx context.Context, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if pod.DeletionTimestamp != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.stopPod(pod.UID)
			// The kubelet's last word: remove the object for good.
			dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			zero := int64(0)
			_ = s.o.Client.CoreV1().Pods(pod.Namespace).Delete(dctx, pod.Name, metav1.DeleteOptions{
				GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID},
			})
		}()
		return
	}
	if pod.Status.Phase != corev1.PodPending && pod.Status.Phase != "" {
		return
	}
	s.mu.Lock()
	if _, ok := s.pods[pod.UID]; ok {
		s.mu.Unlock()
		return
	}
	bctx, cancel := context.WithCancel(ctx)
	b := &backed{uid: pod.UID, ns: pod.Namespace, name: pod.Name, ready: make(chan struct{}), cancel: cancel}
	s.pods[pod.UID] = b
	s.ips++
	// Pod IPs are loopback addresses of their own (127.1.x.y), where the
	// shim relays the pod's ports into its network namespace, so that the
	// provider's pod-IP dial has something real to reach.
	ip := fmt.Sprintf("127.1.%d.%d", s.ips/250, s.ips%250+1)
	s.mu.Unlock()
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.run(bctx, pod.DeepCopy(), b, ip) }()
}

// run backs the pod with a sandbox, starts its container's command there
// and reports it; then it enforces activeDeadlineSeconds.
func (s *Shim) run(ctx context.Context, pod *corev1.Pod, b *backed, ip string) {
	start := time.Now()
	err := s.start(ctx, pod, b)
	b.err = err
	close(b.ready)
	if err != nil {
		if ctx.Err() == nil {
			s.o.Logf("node shim: pod %s: %v", pod.Name, err)
			s.status(pod, corev1.PodFailed, "BerthShimError", err.Error(), ip, start, nil)
		}
		s.stopPod(b.uid)
		return
	}
	if ln, err := s.relay(ctx, b, ip, pod); err != nil {
		s.o.Logf("node shim: pod %s: no pod IP relay: %v", pod.Name, err)
	} else {
		defer ln.Close()
	}
	s.status(pod, corev1.PodRunning, "", "", ip, start, nil)
	if ads := pod.Spec.ActiveDeadlineSeconds; ads != nil {
		t := time.NewTimer(time.Until(start.Add(time.Duration(*ads) * time.Second)))
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
			s.stopPod(b.uid)
			code := int32(137)
			s.status(pod, corev1.PodFailed, "DeadlineExceeded", "Pod was active on the node longer than the specified deadline", ip, start, &code)
		}
	}
}

func (s *Shim) start(ctx context.Context, pod *corev1.Pod, b *backed) error {
	if len(pod.Spec.Containers) == 0 {
		return errors.New("no containers")
	}
	c := pod.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	spec := sandbox.Spec{Image: c.Image, TTL: 24 * time.Hour, Labels: map[string]string{"k8s-pod": pod.Name}}
	sb, err := s.o.Local.Create(ctx, spec)
	if err != nil {
		return fmt.Errorf("back the pod with a local sandbox: %w", err)
	}
	s.mu.Lock()
	b.sb = sb
	s.mu.Unlock()
	marker := "BERTH_SHIM_POD=" + string(pod.UID)
	env["BERTH_SHIM_POD"] = string(pod.UID)
	args := append(append([]string(nil), c.Command...), c.Args...)
	if _, err := sb.Exec(ctx, sandbox.Command{Args: args, Env: env, Stdout: io.Discard, Stderr: io.Discard}); err != nil {
		return fmt.Errorf("start the container command: %w", err)
	}
	for ctx.Err() == nil {
		if b.pid = findMarker(marker); b.pid != 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	port := "49983"
	if len(c.Ports) > 0 {
		port = strconv.Itoa(int(c.Ports[0].ContainerPort))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := dialNetns(b.pid, "127.0.0.1:"+port)
		if err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the container never listened on %s: %w", port, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// relay listens on the pod IP at the container's first port and copies
// each connection to the same port inside the sandbox's network namespace.
func (s *Shim) relay(ctx context.Context, b *backed, ip string, pod *corev1.Pod) (net.Listener, error) {
	port := 49983
	if cs := pod.Spec.Containers; len(cs) > 0 && len(cs[0].Ports) > 0 {
		port = int(cs[0].Ports[0].ContainerPort)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_ = forwarder{b}.PortForward(ctx, "", "", int32(port), c)
			}()
		}
	}()
	return ln, nil
}

// stopPod deletes the pod's sandbox, once.
func (s *Shim) stopPod(uid k8stypes.UID) {
	s.mu.Lock()
	b, ok := s.pods[uid]
	if ok {
		delete(s.pods, uid)
	}
	s.mu.Unlock()
	if !ok {
		return
	}
	b.cancel()
	<-b.ready
	s.mu.Lock()
	sb := b.sb
	s.mu.Unlock()
	if sb != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := sb.Delete(ctx); err != nil {
			s.o.Logf("node shim: delete sandbox of %s: %v", b.name, err)
		}
		_ = sb.Close()
	}
}

// status writes the pod's status as a kubelet would.
func (s *Shim) status(pod *corev1.Pod, phase corev1.PodPhase, reason, msg, ip string, start time.Time, exit *int32) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := metav1.NewTime(start)
	cond := func(t corev1.PodConditionType, ok bool) corev1.PodCondition {
		v := corev1.ConditionFalse
		if ok {
			v = corev1.ConditionTrue
		}
		return corev1.PodCondition{Type: t, Status: v, LastTransitionTime: metav1.Now()}
	}
	running := phase == corev1.PodRunning
	cs := corev1.ContainerStatus{Name: pod.Spec.Containers[0].Name, Image: pod.Spec.Containers[0].Image, ImageID: "berth-local://" + pod.Spec.Containers[0].Image, ContainerID: "berth://" + string(pod.UID)}
	switch {
	case running:
		yes := true
		cs.Ready, cs.Started = true, &yes
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: st}
	case exit != nil:
		cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: *exit, Reason: reason, StartedAt: st, FinishedAt: metav1.Now()}
	default:
		cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 128, Reason: reason, Message: msg, FinishedAt: metav1.Now()}
	}
	for range 5 {
		cur, err := s.o.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || cur.UID != pod.UID {
			return
		}
		cur.Status = corev1.PodStatus{
			Phase: phase, Reason: reason, Message: msg, HostIP: "127.0.0.1", HostIPs: []corev1.HostIP{{IP: "127.0.0.1"}},
			PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, StartTime: &st, QOSClass: cur.Status.QOSClass,
			Conditions: []corev1.PodCondition{
				cond(corev1.PodScheduled, true), cond(corev1.PodInitialized, true),
				cond(corev1.ContainersReady, running), cond(corev1.PodReady, running),
			},
			ContainerStatuses: []corev1.ContainerStatus{cs},
		}
		for _, ic := range pod.Spec.InitContainers {
			cur.Status.InitContainerStatuses = append(cur.Status.InitContainerStatuses, corev1.ContainerStatus{
				Name: ic.Name, Image: ic.Image, Ready: true,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}},
			})
		}
		_, err = s.o.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if err == nil || !apierrors.IsConflict(err) {
			if err != nil {
				s.o.Logf("node shim: pod %s status: %v", pod.Name, err)
			}
			return
		}
	}
}

// servePortForward is the kubelet's /portForward/{ns}/{pod}: each stream
// pair is dialled inside the pod's sandbox network namespace.
func (s *Shim) servePortForward(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("ns"), r.PathValue("pod")
	var b *backed
	s.mu.Lock()
	for _, p := range s.pods {
		if p.ns == ns && p.name == name {
			b = p
		}
	}
	s.mu.Unlock()
	if b == nil {
		http.Error(w, "pod not found on this node", http.StatusNotFound)
		return
	}
	<-b.ready
	if b.err != nil {
		http.Error(w, b.err.Error(), http.StatusServiceUnavailable)
		return
	}
	opts, err := portforward.NewV4Options(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	portforward.ServePortForward(w, r, forwarder{b}, name, string(b.uid), opts, 4*time.Hour, 30*time.Second, []string{"portforward.k8s.io"})
}

type forwarder struct{ b *backed }

func (f forwarder) PortForward(ctx context.Context, _ string, _ string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	c, err := dialNetns(f.b.pid, "127.0.0.1:"+strconv.Itoa(int(port)))
	if err != nil {
		return err
	}
	defer c.Close()
	// Both directions run to their end, as the kubelet's runtimes do: each
	// side's half-close is passed on to the other (the stream's Close is
	// its FIN), and the answer still flows back after the client's.
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(c, stream); _ = c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	go func() { _, _ = io.Copy(stream, c); _ = stream.Close(); done <- struct{}{} }()
	for range 2 {
		select {
		case <-done:
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// dialNetns connects to addr inside the network namespace of pid, from a
// thread that enters it and is never reused (the goroutine stays locked to
// it and exits, which ends the thread).
func dialNetns(pid int, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "ns", "net"))
		if err != nil {
			ch <- result{nil, err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{nil, fmt.Errorf("enter the pod's network namespace: %w", err)}
			return
		}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// findMarker returns the host pid of the process whose environment holds
// marker, 0 when none does yet.
func findMarker(marker string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for kv := range strings.SplitSeq(string(b), "\x00") {
			if kv == marker {
				return pid
			}
		}
	}
	return 0
}
