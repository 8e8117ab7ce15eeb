package mesh

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every node certificate carries 127.0.0.1 and ::1 as IP SANs, so TLS's
// own name check passes any node's certificate for a node named
// "127.0.0.1"; the client must still refuse all but that node's.
func TestClientVerifiesNodeName(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "127.0.0.1", "host0", "host2")
	ip := startServer(t, dir, "127.0.0.1", 1, "127.0.0.1:0", nil)
	other := startServer(t, dir, "host2", 1, "127.0.0.1:0", nil)
	id := loadID(t, dir, "host0")

	// A node named by an IP address is still reached under that name.
	c := newTestClient(t, id, map[int]Peer{1: ip.peer()}, nil)
	if err := checkSample(c, 1, &SampleRequest{Fanout: 2, IDs: ids(4, 0)}); err != nil {
		t.Fatalf("node named 127.0.0.1: %v", err)
	}

	// host2's certificate, where node 127.0.0.1 is expected.
	c = newTestClient(t, id, map[int]Peer{1: {Name: "127.0.0.1", Addr: other.peer().Addr}}, nil)
	err := c.WaitReady(context.Background())
	t.Log(err)
	if want := `certificate of node "host2", want "127.0.0.1"`; !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v\nwant ErrRefused containing %q", err, want)
	}
	if n := other.handler.calls.Load(); n != 0 {
		t.Fatalf("handler of the wrong node called %d times", n)
	}
}

// reissue signs a new certificate and key for node with the CA in dir,
// valid from notBefore to notAfter, and writes them to dir. Its extended
// key usages are usages, or server and client authentication as
// WriteCluster's when none are given.
func reissue(t *testing.T, dir, node string, notBefore, notAfter time.Time, usages ...x509.ExtKeyUsage) {
	t.Helper()
	if len(usages) == 0 {
		usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, CAcertFile))
	if err != nil {
		t.Fatal(err)
	}
	caKeyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := tls.X509KeyPair(caPEM, caKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: node, Organization: ca.Leaf.Subject.Organization},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usages,
		DNSNames:     []string{node},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Leaf, &key.PublicKey, ca.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := writePEM(CertFile(dir, node), "CERTIFICATE", der); err != nil {
		t.Fatal(err)
	}
	if err := writeKey(KeyFile(dir, node), key); err != nil {
		t.Fatal(err)
	}
}

// An expired certificate is named as such: LoadIdentity says it expired
// and when, and a node whose certificate expired after it loaded it is
// told by the peer's refusal that its own certificate is the expired one.
func TestExpiredCertificate(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host0", "host1")
	id := loadID(t, dir, "host0")
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", nil)
	expired := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	reissue(t, dir, "host0", expired.Add(-24*time.Hour), expired)

	_, err := LoadIdentity(dir, "host0")
	want := "host0.crt: expired at " + expired.Format(time.RFC3339)
	if !errors.Is(err, ErrCert) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "not signed by") {
		t.Fatalf("LoadIdentity: %v\nwant ErrCert containing %q", err, want)
	}

	// The node runs on with the certificate it loaded, which has expired since.
	pair, err := tls.LoadX509KeyPair(CertFile(dir, "host0"), KeyFile(dir, "host0"))
	if err != nil {
		t.Fatal(err)
	}
	id.Cert = pair
	c := newTestClient(t, id, map[int]Peer{1: srv.peer()}, nil)
	err = c.WaitReady(context.Background())
	if want := "peer rejected this node's certificate as expired"; !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) {
		t.Fatalf("WaitReady: %v\nwant ErrRefused containing %q", err, want)
	}
}
