package modaltest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/netip"
	"time"

	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-sh/berth/internal/portproxy"
	"github.com/berth-sh/berth/internal/testing/fakeengine"
	"github.com/berth-sh/berth/sandbox/driver"
)

// Tunnels, as Modal's: each port the definition opens gets a listener on
// the loopback address that terminates TLS (the tunnel's Host and Port,
// whose URL is https://...), and an unencrypted port also a plain TCP
// listener (UnencryptedHost and UnencryptedPort). Each connection is
// carried to that port on the loopback address, where a server started in
// the sandbox listens (the fake's commands share the host's network); when
// nothing listens there the connection is closed, as a tunnel has no HTTP
// layer to answer with. The TLS certificate is signed by the server's own
// CA (TunnelRoots). Listeners close when the sandbox ends. Create answers
// the encrypted tunnels only (Modal knows the unencrypted addresses later);
// SandboxGetTunnelsV2 answers all.

// TunnelRoots is the pool clients trust the tunnels' certificates with.
func (s *Server) TunnelRoots() *x509.CertPool {
	ca, _, err := s.tunnelCA()
	if err != nil {
		panic(err) // key generation does not fail
	}
	p := x509.NewCertPool()
	p.AddCert(ca)
	return p
}

// tunnelCA makes, once, a CA and a certificate for 127.0.0.1 it signed.
func (s *Server) tunnelCA() (*x509.Certificate, *tls.Certificate, error) {
	s.caOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			s.caErr = err
			return
		}
		now := time.Now()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "modaltest tunnel CA"},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			s.caErr = err
			return
		}
		ca, _ := x509.ParseCertificate(der)
		leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		leaf := &x509.Certificate{
			SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour),
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
		}
		leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &leafKey.PublicKey, key)
		if err != nil {
			s.caErr = err
			return
		}
		s.ca = ca
		s.leaf = &tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}
	})
	return s.ca, s.leaf, s.caErr
}

// tunnel is one open port's listeners.
type tunnel struct {
	port       int
	tlsLn, tcp *portproxy.Listener // tcp is nil for an encrypted port
}

// openTunnels starts the listeners of the definition's ports.
func (sb *sandbox) openTunnels() error {
	specs := sb.def.GetOpenPorts().GetPorts()
	if len(specs) == 0 {
		return nil
	}
	_, leaf, err := sb.s.tunnelCA()
	if err != nil {
		return status.Errorf(codes.Internal, "tunnel certificate: %v", err)
	}
	for _, ps := range specs {
		if ps.GetPort() == 0 || ps.GetPort() > 65535 {
			return status.Errorf(codes.InvalidArgument, "invalid port %d", ps.GetPort())
		}
		t := &tunnel{port: int(ps.GetPort())}
		dial := func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", fakeengine.Loopback(t.port))
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return status.Errorf(codes.Internal, "tunnel listener: %v", err)
		}
		t.tlsLn = portproxy.Serve(tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{*leaf}}), dial, driver.PortTCP)
		sb.tunnels = append(sb.tunnels, t)
		if ps.GetUnencrypted() {
			if t.tcp, err = portproxy.Listen(dial, driver.PortTCP); err != nil {
				return status.Errorf(codes.Internal, "tunnel listener: %v", err)
			}
		}
	}
	return nil
}

// closeTunnels stops the listeners and ends their connections.
func (sb *sandbox) closeTunnels() {
	for _, t := range sb.tunnels {
		t.tlsLn.Close()
		if t.tcp != nil {
			t.tcp.Close()
		}
	}
}

// port is the port a listener has on the loopback address.
func port(l *portproxy.Listener) *uint32 {
	ap, _ := netip.ParseAddrPort(l.Addr())
	p := uint32(ap.Port())
	return &p
}

// tunnelData describes the tunnels; encryptedOnly leaves out the
// unencrypted ports (create's answer).
func (sb *sandbox) tunnelData(encryptedOnly bool) []*pb.TunnelData {
	var out []*pb.TunnelData
	for _, t := range sb.tunnels {
		if encryptedOnly && t.tcp != nil {
			continue
		}
		b := pb.TunnelData_builder{Host: "127.0.0.1", Port: *port(t.tlsLn), ContainerPort: uint32(t.port)}
		if t.tcp != nil {
			h := "127.0.0.1"
			b.UnencryptedHost, b.UnencryptedPort = &h, port(t.tcp)
		}
		out = append(out, b.Build())
	}
	return out
}

func (c *control) SandboxGetTunnelsV2(_ context.Context, req *pb.SandboxGetTunnelsRequest) (*pb.SandboxGetTunnelsResponse, error) {
	sb, err := c.s.sandboxByID(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	if res := sb.resultOrNil(); res != nil {
		return pb.SandboxGetTunnelsResponse_builder{Result: res}.Build(), nil
	}
	return pb.SandboxGetTunnelsResponse_builder{
		Result:  pb.GenericResult_builder{Status: pb.GenericResult_GENERIC_STATUS_SUCCESS}.Build(),
		Tunnels: sb.tunnelData(false),
	}.Build(), nil
}
