package mesh

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"

	"github.com/quic-go/quic-go"
)

// serverTLS is TLS 1.3 only, requires a client certificate signed by the
// cluster CA and naming the cluster, and speaks only alpn.
func serverTLS(id *Identity, alpn string) *tls.Config {
	return &tls.Config{
		MinVersion:       tls.VersionTLS13,
		Certificates:     []tls.Certificate{id.Cert},
		ClientAuth:       tls.RequireAndVerifyClientCert,
		ClientCAs:        id.Roots,
		NextProtos:       []string{alpn},
		VerifyConnection: verifyCluster(id.Cluster),
	}
}

// clientTLS verifies that the server holds the certificate of node
// serverName, signed by the cluster CA.
func clientTLS(id *Identity, serverName, alpn string) *tls.Config {
	return &tls.Config{
		MinVersion:       tls.VersionTLS13,
		Certificates:     []tls.Certificate{id.Cert},
		RootCAs:          id.Roots,
		ServerName:       serverName,
		NextProtos:       []string{alpn},
		VerifyConnection: verifyNode(id.Cluster, serverName),
	}
}

// verifyNode is verifyCluster that also wants the certificate of node
// itself, by its CommonName (the name LoadIdentity and the server go by).
// TLS matched node against the certificate's SANs only, and every node
// certificate carries 127.0.0.1 and ::1: for a node named "127.0.0.1",
// that match alone passes the certificate of any node of the cluster.
func verifyNode(cluster, node string) func(tls.ConnectionState) error {
	inCluster := verifyCluster(cluster)
	return func(cs tls.ConnectionState) error {
		if err := inCluster(cs); err != nil {
			return err
		}
		if cn := cs.PeerCertificates[0].Subject.CommonName; cn != node {
			return fmt.Errorf("mesh: certificate of node %q, want %q", cn, node)
		}
		return nil
	}
}

// verifyCluster runs after chain verification: the peer's certificate
// must also name the cluster, which a CA shared by two clusters (made by
// hand) would otherwise not ensure.
func verifyCluster(cluster string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("mesh: peer sent no certificate")
		}
		leaf := cs.PeerCertificates[0]
		if !slices.Equal(leaf.Subject.Organization, []string{cluster}) {
			return fmt.Errorf("mesh: certificate of %q names cluster %v, want %q", leaf.Subject.CommonName, leaf.Subject.Organization, cluster)
		}
		return nil
	}
}

// TLS alerts (RFC 8446 §6) that quic-go reports as crypto errors 0x100+alert.
const (
	alertBadCertificate      = 42
	alertCertificateExpired  = 45
	alertUnknownCA           = 48
	alertCertificateRequired = 116
	alertNoApplicationProto  = 120
)

// explainHandshake turns a failed handshake with peer (its node name, ""
// when unknown) into an error that says what differs, wrapping
// ErrRefused; ok is false for errors that are not about identity or
// version (timeouts, resets), which may be retried.
func explainHandshake(err error, id *Identity, peer, alpn string) (_ error, ok bool) {
	var te *quic.TransportError
	var ua x509.UnknownAuthorityError
	if errors.As(err, &te) && te.ErrorCode.IsCryptoError() && !te.Remote && errors.As(err, &ua) {
		// "signed by unknown authority" alone left each side to think the
		// other's files wrong: name the CA this node goes by.
		whose := "the peer's certificate"
		if peer != "" {
			whose = "the certificate of " + peer
		}
		return fmt.Errorf("TLS handshake: this node rejected %s: not signed by the CA in %s (hosts holding files of different node cert init runs? compare ca.crt on both; every host needs the cluster's ca.crt and a certificate it signed): %v: %w",
			whose, id.caFile, err, ErrRefused), true
	}
	if errors.As(err, &te) && te.ErrorCode.IsCryptoError() {
		// A rejection by this node carries its reason in err; of the
		// peer's, the alert is all there is, so the likely cause is named.
		side := "peer rejected the certificate (not signed by this cluster's CA?)"
		if !te.Remote {
			side = "this node rejected the certificate"
		}
		switch uint8(te.ErrorCode - 0x100) {
		case alertNoApplicationProto:
			return fmt.Errorf("protocol version: no common ALPN protocol (this node speaks %q): %w", alpn, ErrRefused), true
		case alertCertificateExpired:
			// This node's own rejections name the certificate in err.
			if te.Remote {
				return fmt.Errorf("TLS handshake: peer rejected this node's certificate as expired or not yet valid (renew it with node cert add --node NAME --force, or every node's with node cert init --force when the CA expired; or check the clocks): %v: %w", err, ErrRefused), true
			}
		case alertBadCertificate, alertUnknownCA, alertCertificateRequired:
			return fmt.Errorf("TLS handshake: %s: %v: %w", side, err, ErrRefused), true
		}
		return fmt.Errorf("TLS handshake: %v: %w", err, ErrRefused), true
	}
	var ve *tls.CertificateVerificationError
	var he x509.HostnameError
	if errors.As(err, &ve) || errors.As(err, &he) {
		return fmt.Errorf("TLS handshake: %v: %w", err, ErrRefused), true
	}
	return err, false
}
