package k8stest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// EnvBin names the directory holding the control plane's binaries;
// controlplane/build.sh fills it. Unset means DefaultBinDir.
const EnvBin = "BERTH_K8S_BIN"

// Binaries Start runs (kwok only when asked).
var controlPlane = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// DefaultBinDir is where build.sh puts the binaries by default: one
// directory per pinned version set, so that a version bump rebuilds.
func DefaultBinDir() string {
	dir := os.Getenv("XDG_CACHE_HOME")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache")
	}
	return filepath.Join(dir, "berth-k8s", Versions)
}

// Versions names the pinned set (controlplane/go.mod and build.sh).
const Versions = "k8s-v1.37.2_etcd-v3.7.3_kwok-v0.8.0_as-v0.5.0"

// BinDir is EnvBin, else DefaultBinDir.
func BinDir() string {
	if d := os.Getenv(EnvBin); d != "" {
		return d
	}
	return DefaultBinDir()
}

// Missing says why the control plane cannot run here ("" when it can):
// the binaries are not built.
func Missing(extra ...string) string {
	dir := BinDir()
	for _, b := range append(append([]string(nil), controlPlane...), extra...) {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || (!strings.Contains(b, ".") && fi.Mode()&0o111 == 0) {
			return fmt.Sprintf("the test control plane is not built (%s missing in %s): run internal/testing/k8stest/controlplane/build.sh, or set %s", b, dir, EnvBin)
		}
	}
	return ""
}

// Cluster is a running control plane.
type Cluster struct {
	// Dir holds the certificates, kubeconfigs, etcd's data and the logs.
	Dir string
	// Kubeconfig is an admin (system:masters) kubeconfig file.
	Kubeconfig string
	// Config is the admin client configuration.
	Config *rest.Config
	// Client is an admin clientset.
	Client kubernetes.Interface
	// CA signs every certificate of the cluster, kubelet endpoints
	// included (the API server verifies them with it).
	CA *CA
	// Server is the API server's URL.
	Server string

	procs []*exec.Cmd
}

// Start runs etcd, the API server, the scheduler and the controller
// manager, and returns once the API server is ready. Stop ends them.
func Start(ctx context.Context) (_ *Cluster, err error) {
	if why := Missing(); why != "" {
		return nil, errors.New(why)
	}
	dir, err := os.MkdirTemp("", "berth-k8s-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if c.CA, err = newCA(); err != nil {
		return nil, err
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if werr := os.WriteFile(p, b, 0o600); werr != nil && err == nil {
			err = werr
		}
		return p
	}
	caFile := write("ca.crt", c.CA.CertPEM)
	sc, sk, err := c.CA.Issue("kube-apiserver", nil,
		[]net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 96, 0, 1)},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"})
	if err != nil {
		return nil, err
	}
	serverCert, serverKey := write("apiserver.crt", sc), write("apiserver.key", sk)
	ac, ak, err := c.CA.Issue("berth-test-admin", []string{"system:masters"}, nil, nil)
	if err != nil {
		return nil, err
	}
	adminCert, adminKey := write("admin.crt", ac), write("admin.key", ak)
	saKey, saPub, err := writeRSAKey(dir)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	c.Server = "https://127.0.0.1:" + strconv.Itoa(ports[2])
	if err := c.run("etcd", "--name=default", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL, "--unsafe-no-fsync", "--log-level=warn"); err != nil {
		return nil, err
	}
	if err := c.run("kube-apiserver", "--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports[2]),
		"--tls-cert-file="+serverCert, "--tls-private-key-file="+serverKey, "--client-ca-file="+caFile,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+saPub, "--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.96.0.0/24", "--authorization-mode=Node,RBAC",
		"--kubelet-client-certificate="+adminCert, "--kubelet-client-key="+adminKey,
		"--kubelet-certificate-authority="+caFile, "--kubelet-preferred-address-types=InternalIP",
		"--allow-privileged=true", "--profiling=false", "--v=1",
		// Loopback cannot be the kubernetes Service's endpoint; nothing here needs one.
		"--endpoint-reconciler-type=none"); err != nil {
		return nil, err
	}
	cfg := &clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"test": {Server: c.Server, CertificateAuthority: caFile}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"admin": {ClientCertificate: adminCert, ClientKey: adminKey}},
		Contexts:       map[string]*clientcmdapi.Context{"test": {Cluster: "test", AuthInfo: "admin"}},
		CurrentContext: "test",
	}
	c.Kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, c.Kubeconfig); err != nil {
		return nil, err
	}
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return nil, err
	}
	c.Config.QPS, c.Config.Burst = 100, 200
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return nil, err
	}
	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}
	if err := c.run("kube-controller-manager", "--kubeconfig="+c.Kubeconfig,
		"--authentication-kubeconfig="+c.Kubeconfig, "--authorization-kubeconfig="+c.Kubeconfig,
		"--service-account-private-key-file="+saKey, "--root-ca-file="+caFile,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
		"--v=1"); err != nil {
		return nil, err
	}
	if err := c.run("kube-scheduler", "--kubeconfig="+c.Kubeconfig,
		"--authentication-kubeconfig="+c.Kubeconfig, "--authorization-kubeconfig="+c.Kubeconfig,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0", "--v=1"); err != nil {
		return nil, err
	}
	return c, nil
}

// run starts a binary from BinDir in its own process group, logging to
// Dir/<name>.log.
func (c *Cluster) run(name string, args ...string) error {
	log, err := os.Create(filepath.Join(c.Dir, name+".log"))
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(filepath.Join(BinDir(), name), args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := startOnSpawner(cmd); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	c.procs = append(c.procs, cmd)
	return nil
}

// RunKwok starts kwok managing the nodes annotated kwok.x-k8s.io/node=fake
// (and their pods): nodes that run nothing, for scale tests.
func (c *Cluster) RunKwok() error {
	if why := Missing("kwok", "kwok-stages.yaml"); why != "" {
		return errors.New(why)
	}
	return c.run("kwok", "--kubeconfig="+c.Kubeconfig, "--config="+filepath.Join(BinDir(), "kwok-stages.yaml"),
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr=10.200.0.0/16", "--node-ip=10.199.0.1", "--node-lease-duration-seconds=40")
}

func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last error
	for {
		body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && strings.TrimSpace(string(body)) == "ok" {
			return nil
		}
		last = err
		if exited := c.exited(); exited != "" {
			return fmt.Errorf("%s exited: %s", exited, c.Tail(exited))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the API server did not become ready: %v; %s", last, c.Tail("kube-apiserver"))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// exited names a process of the cluster that has exited.
func (c *Cluster) exited() string {
	for _, p := range c.procs {
		if p.ProcessState != nil {
			return filepath.Base(p.Path)
		}
		var ws syscall.WaitStatus
		if pid, _ := syscall.Wait4(p.Process.Pid, &ws, syscall.WNOHANG, nil); pid == p.Process.Pid {
			p.ProcessState = &os.ProcessState{}
			return filepath.Base(p.Path)
		}
	}
	return ""
}

// Tail returns the end of a component's log, for failures.
func (c *Cluster) Tail(name string) string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, name+".log"))
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// Stop kills every process of the cluster and removes Dir.
func (c *Cluster) Stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
		if p.ProcessState == nil {
			_, _ = p.Process.Wait()
		}
	}
	c.procs = nil
	if c.Dir != "" {
		os.RemoveAll(c.Dir)
	}
}

// UserConfig is a client configuration for a user of the given name and
// groups (a client certificate from the cluster's CA), for RBAC tests.
func (c *Cluster) UserConfig(name string, groups ...string) (*rest.Config, error) {
	cert, key, err := c.CA.Issue(name, groups, nil, nil)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:            c.Server,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CA.CertPEM, CertData: cert, KeyData: key},
		QPS:             100, Burst: 200,
	}, nil
}

// Pdeathsig fires when the thread that forked the child exits, and Go ends
// threads (one a goroutine locked to it leaves, as the node shim's netns
// dialer does), so every process of the cluster is forked from one thread
// that never exits: they die with the test binary, and only with it.
var spawn = make(chan spawnReq)

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

func init() {
	go func() {
		runtime.LockOSThread()
		for r := range spawn {
			r.done <- r.cmd.Start()
		}
	}()
}

func startOnSpawner(cmd *exec.Cmd) error {
	done := make(chan error)
	spawn <- spawnReq{cmd, done}
	return <-done
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
