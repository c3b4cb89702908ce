package local_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/sandbox"
)

// The port benchmarks set a path through berth beside a direct one in the
// same run: the conformance suite's portserver runs inside a network-none
// sandbox, reached through Endpoint (a loopback listener of this process,
// each connection carried over the agent's socket), and the same binary
// runs on this host, reached over loopback without berth.
// Run: go test ./providers/local -run '^$' -bench 'Port' -benchtime 3x

// portServers starts the portserver in a sandbox and on the host, and
// returns the sandbox's endpoint and the host server's address for proto.
func portServers(b *testing.B, proto sandbox.PortProtocol) (sandbox.Endpoint, string) {
	b.Helper()
	bin, err := testbin.Static("portserver", "github.com/berth-sh/berth/sandbox/sandboxtest/internal/portserver")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	p := benchProvider(b)
	sb := benchSandbox(b, p)
	f, err := os.Open(bin)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := sb.WriteFrom(ctx, "/tmp/portserver", f, 0o755); err != nil {
		b.Fatal(err)
	}
	const inside = 8000
	flag := "-" + string(proto) // -http or -tcp
	if _, err := sb.Exec(ctx, sandbox.Command{Args: []string{"/tmp/portserver", flag, strconv.Itoa(inside)}}); err != nil {
		b.Fatal(err)
	}
	ep, err := sb.Endpoint(ctx, sandbox.Port{Number: inside, Protocol: proto})
	if err != nil {
		b.Fatal(err)
	}
	hostPort := freeHostPort(b)
	cmd := exec.Command(bin, flag, strconv.Itoa(hostPort))
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	epAddr, err := ep.Addr()
	if err != nil {
		b.Fatal(err)
	}
	direct := net.JoinHostPort("127.0.0.1", strconv.Itoa(hostPort))
	for _, addr := range []string{direct, epAddr} {
		waitAnswers(b, addr, proto)
	}
	return ep, direct
}

func freeHostPort(b *testing.B) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitAnswers polls addr until its server answers: GET / for http, one
// echoed byte for tcp (the local endpoint accepts before the sandbox's
// server does, and closes when nothing is there).
func waitAnswers(b *testing.B, addr string, proto sandbox.PortProtocol) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := probe(addr, proto)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s never answered: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func probe(addr string, proto sandbox.PortProtocol) error {
	if proto == sandbox.PortHTTP {
		res, err := http.Get("http://" + addr + "/")
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", res.StatusCode)
		}
		return nil
	}
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte{1}); err != nil {
		return err
	}
	_, err = io.ReadFull(c, make([]byte, 1))
	return err
}

// BenchmarkPortHTTP times GET / on a kept-alive connection, alternating
// the direct server and the sandbox's endpoint, and reports both medians
// and their difference: the latency Endpoint adds.
func BenchmarkPortHTTP(b *testing.B) {
	ep, direct := portServers(b, sandbox.PortHTTP)
	get := func(c *http.Client, url string) time.Duration {
		t0 := time.Now()
		res, err := c.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, err = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d %v", url, res.StatusCode, err)
		}
		return time.Since(t0)
	}
	dc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	ec := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer dc.CloseIdleConnections()
	defer ec.CloseIdleConnections()
	get(dc, "http://"+direct+"/") // open the connections outside the timings
	get(ec, ep.Join("/"))
	var ds, es []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ds = append(ds, get(dc, "http://"+direct+"/"))
		es = append(es, get(ec, ep.Join("/")))
	}
	d, e := median(ds), median(es)
	b.ReportMetric(ms(d), "direct-p50-ms")
	b.ReportMetric(ms(e), "endpoint-p50-ms")
	b.ReportMetric(ms(e-d), "added-p50-ms")
}

// BenchmarkPortTCP sends 1 GB to the portserver's tcp echo and reads the
// 1 GB it echoes, at once, directly and then through the sandbox's tcp
// endpoint, and reports both throughputs (bytes sent per second) and
// the endpoint's as a percentage of the direct one.
func BenchmarkPortTCP(b *testing.B) {
	ep, direct := portServers(b, sandbox.PortTCP)
	epAddr, err := ep.Addr()
	if err != nil {
		b.Fatal(err)
	}
	const size = 1 << 30
	var dt, et time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dt += echo(b, direct, size)
		et += echo(b, epAddr, size)
	}
	mbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / 1e6 }
	b.ReportMetric(mbps(dt), "direct-MB/s")
	b.ReportMetric(mbps(et), "endpoint-MB/s")
	b.ReportMetric(100*mbps(et)/mbps(dt), "endpoint-%")
}

// echo sends n bytes to addr, half-closes, and reads until the echo ends,
// requiring all n back.
func echo(b *testing.B, addr string, n int64) time.Duration {
	t0 := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	sent := make(chan error, 1)
	go func() {
		_, err := io.CopyBuffer(c, io.LimitReader(zeros{}, n), make([]byte, 256<<10))
		if err == nil {
			err = c.(*net.TCPConn).CloseWrite()
		}
		sent <- err
	}()
	got, err := io.CopyBuffer(io.Discard, c, make([]byte, 256<<10))
	if err := errors.Join(err, <-sent); err != nil || got != n {
		b.Fatalf("echo through %s: %d of %d bytes back: %v", addr, got, n, err)
	}
	return time.Since(t0)
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
