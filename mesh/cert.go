package mesh

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"
)

// Identity is a node's TLS material: its certificate and key, and the
// cluster CA every peer must be signed by.
type Identity struct {
	Cluster string // the CA's Organization: the cluster name
	Node    string // the node certificate's CommonName
	Cert    tls.Certificate
	Roots   *x509.CertPool // the cluster CA alone
	CA      *x509.Certificate
	caFile  string      // the CA's file, for errors that compare it with a peer's
	pem     IdentityPEM // what it was built from (PEM)

	// resetKey is derived from the node's private key, so it survives a
	// restart: peers holding a connection to the previous process get a
	// stateless reset at once instead of waiting for the idle timeout.
	resetKey [32]byte
}

// ClusterSpec describes the certificates WriteCluster creates.
type ClusterSpec struct {
	Cluster  string
	Nodes    []string
	Validity time.Duration // 0 = DefaultCertValidity
	// NotBefore is the start of validity; zero means an hour before now,
	// to tolerate clocks that lag.
	NotBefore time.Time
	// Force overwrites an existing CA key; without it WriteCluster
	// refuses, because a new CA locks out every node holding the old one.
	Force bool
}

// DefaultCertValidity is the lifetime of certificates when
// ClusterSpec.Validity is zero: ten years (an internal CA; rotate by
// re-running node cert init --force and restarting the cluster).
const DefaultCertValidity = 10 * 365 * 24 * time.Hour

// File names inside a certificate directory.
const (
	CAcertFile = "ca.crt"
	CAKeyFile  = "ca.key"
)

// CertFile and KeyFile are a node's certificate and key in a directory.
func CertFile(dir, node string) string { return filepath.Join(dir, node+".crt") }
func KeyFile(dir, node string) string  { return filepath.Join(dir, node+".key") }

// CheckName reports whether s can name a cluster or node: 1–253 ASCII
// letters, digits, '.', '-', '_', not starting with '.' or '-' (node names
// become file names and DNS names in certificates). A character not
// allowed is named as the user typed it: the check went by bytes, and
// called "é" the character 'Ã'.
func CheckName(kind, s string) error {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			continue
		}
		what := fmt.Sprintf("character %q", r)
		if r == utf8.RuneError && size == 1 {
			what = fmt.Sprintf("byte %#x (not UTF-8)", s[i-1])
		}
		return fmt.Errorf("mesh: %s name %q: %s not allowed: want ASCII letters, digits, '.', '-', '_'", kind, s, what)
	}
	if s == "" || len(s) > 253 {
		return fmt.Errorf("mesh: %s name %q: want 1 to 253 characters", kind, s)
	}
	if s[0] == '.' || s[0] == '-' {
		return fmt.Errorf("mesh: %s name %q: must not start with %q", kind, s, s[0])
	}
	return nil
}

// CheckNodeName reports whether name can be a node's: a name CheckName
// takes, and not "ca", whose files are the CA's.
func CheckNodeName(name string) error {
	if err := CheckName("node", name); err != nil {
		return err
	}
	if name == "ca" {
		return fmt.Errorf("mesh: node name %q is reserved for the CA files", name)
	}
	return nil
}

// CheckNodes reports every problem of a cluster's node names: each name
// CheckNodeName refuses, and each listed twice (once).
func CheckNodes(names []string) []error {
	var errs []error
	seen := make(map[string]int, len(names))
	for _, n := range names {
		if err := CheckNodeName(n); err != nil {
			errs = append(errs, err)
		} else if seen[n]++; seen[n] == 2 {
			errs = append(errs, fmt.Errorf("mesh: node %q listed twice", n))
		}
	}
	return errs
}

// WriteCluster creates dir (mode 0700 if new) and writes a new cluster CA
// (ca.crt, ca.key) and, for each node, NODE.crt and NODE.key signed by
// it. Every file is written with mode 0600, through a temporary file and
// a rename. Keys are ECDSA P-256. Node certificates carry the node name
// as CommonName and DNS name, 127.0.0.1 and ::1 (and the name itself when
// it is an IP address) as IP addresses, and serve both server and client
// authentication.
func WriteCluster(dir string, spec ClusterSpec) error {
	var errs []error
	if err := CheckName("cluster", spec.Cluster); err != nil {
		errs = append(errs, err)
	}
	if len(spec.Nodes) == 0 {
		errs = append(errs, errors.New("mesh: no nodes"))
	}
	errs = append(errs, CheckNodes(spec.Nodes)...)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// ca.crt too: the CA's key is best kept off the nodes, and a cluster
	// whose ca.key was moved away is as live as one whose was not.
	for _, name := range []string{CAKeyFile, CAcertFile} {
		if p := filepath.Join(dir, name); fileExists(p) && !spec.Force {
			return fmt.Errorf("mesh: %s exists: a new CA would lock out every node holding the old one (node cert init --force replaces it; node cert add adds a node to it): %w", p, fs.ErrExist)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("mesh: %w", err)
	}
	validity := spec.Validity
	if validity <= 0 {
		validity = DefaultCertValidity
	}
	notBefore := spec.NotBefore
	if notBefore.IsZero() {
		notBefore = time.Now().Add(-time.Hour)
	}
	notAfter := notBefore.Add(validity)

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("mesh: CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject: pkix.Name{
			CommonName:         "graphnode CA " + spec.Cluster,
			Organization:       []string{spec.Cluster},
			OrganizationalUnit: []string{"graphnode"},
		},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("mesh: CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return fmt.Errorf("mesh: CA certificate: %w", err)
	}
	for _, node := range spec.Nodes {
		if err := writeNode(dir, spec.Cluster, node, ca, caKey, notBefore, notAfter); err != nil {
			return err
		}
	}
	// The CA goes last, so an interrupted run leaves no CA file and can be
	// repeated without force (but for one interrupted between ca.crt and
	// ca.key: force then).
	if err := writePEM(filepath.Join(dir, CAcertFile), "CERTIFICATE", caDER); err != nil {
		return err
	}
	return writeKey(filepath.Join(dir, CAKeyFile), caKey)
}

// NodeSpec describes the certificate AddNode creates.
type NodeSpec struct {
	Node     string
	Validity time.Duration // 0 = DefaultCertValidity; never past the CA's
	// NotBefore is the start of validity; zero means an hour before now,
	// to tolerate clocks that lag.
	NotBefore time.Time
	// Force overwrites the node's existing certificate and key; without
	// it AddNode refuses, because the node may be running with them.
	Force bool
}

// AddNode signs a certificate for one more node with the cluster CA in
// dir (ca.crt and ca.key, as WriteCluster wrote them) and writes NODE.crt
// and NODE.key as WriteCluster does, so a host joins the cluster without
// new certificates for the others. The certificate ends with the CA at
// the latest. It returns the certificate written.
func AddNode(dir string, spec NodeSpec) (*x509.Certificate, error) {
	if err := CheckNodeName(spec.Node); err != nil {
		return nil, err
	}
	caPath, caKeyPath := filepath.Join(dir, CAcertFile), filepath.Join(dir, CAKeyFile)
	var missing []string
	for _, p := range []string{caPath, caKeyPath} {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("mesh: %s: a node is signed by the cluster CA's certificate and key, ca.crt and ca.key, as node cert init wrote them (bring ca.key back where it is kept): %w", strings.Join(missing, ", "), fs.ErrNotExist)
	}
	caPEM, err := os.ReadFile(caPath)
	if err != nil {
		return nil, fmt.Errorf("mesh: %w", err)
	}
	caKeyPEM, err := os.ReadFile(caKeyPath)
	if err != nil {
		return nil, fmt.Errorf("mesh: %w", err)
	}
	pair, err := tls.X509KeyPair(caPEM, caKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("mesh: %s, %s: %w: %w", caPath, caKeyPath, ErrCert, err)
	}
	ca, caKey := pair.Leaf, pair.PrivateKey
	if !ca.IsCA || len(ca.Subject.Organization) != 1 {
		return nil, fmt.Errorf("mesh: %s: not a graphnode cluster CA (want a CA certificate naming the cluster as its Organization): %w", caPath, ErrCert)
	}
	now := time.Now()
	if d := outOfDate(ca, now); d != "" {
		return nil, fmt.Errorf("mesh: %s: %s: a node signed by it would be refused; write new certificates for every node (node cert init --force): %w", caPath, d, ErrCert)
	}
	if !spec.Force {
		for _, p := range []string{CertFile(dir, spec.Node), KeyFile(dir, spec.Node)} {
			if fileExists(p) {
				return nil, fmt.Errorf("mesh: %s exists: node %s has a certificate (node cert add --force replaces it; the node must then be restarted with the new one): %w", p, spec.Node, fs.ErrExist)
			}
		}
	}
	validity := spec.Validity
	if validity <= 0 {
		validity = DefaultCertValidity
	}
	notBefore := spec.NotBefore
	if notBefore.IsZero() {
		notBefore = now.Add(-time.Hour)
	}
	notBefore = later(notBefore, ca.NotBefore)
	notAfter := notBefore.Add(validity)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter // past it, the chain is refused
	}
	cluster := ca.Subject.Organization[0]
	if err := writeNode(dir, cluster, spec.Node, ca, caKey, notBefore, notAfter); err != nil {
		return nil, err
	}
	id, err := LoadIdentity(dir, spec.Node)
	if err != nil {
		return nil, err
	}
	return id.Cert.Leaf, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func writeNode(dir, cluster, node string, ca *x509.Certificate, caKey crypto.PrivateKey, notBefore, notAfter time.Time) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("mesh: node %s: key: %w", node, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: node, Organization: []string{cluster}},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{node},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if ip := net.ParseIP(node); ip != nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("mesh: node %s: certificate: %w", node, err)
	}
	if err := writePEM(CertFile(dir, node), "CERTIFICATE", der); err != nil {
		return err
	}
	return writeKey(KeyFile(dir, node), key)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic("mesh: crypto/rand failed: " + err.Error()) // crypto/rand does not fail on Linux
	}
	return n.Add(n, big.NewInt(1))
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("mesh: %s: %w", path, err)
	}
	return writePEM(path, "PRIVATE KEY", der)
}

// writePEM writes one PEM block to path with mode 0600: temporary file,
// fsync, rename.
func writePEM(path, typ string, der []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("mesh: %w", err)
	}
	defer os.Remove(tmp.Name())
	err = tmp.Chmod(0o600)
	if err == nil {
		err = pem.Encode(tmp, &pem.Block{Type: typ, Bytes: der})
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("mesh: write %s: %w", path, err)
	}
	return nil
}
