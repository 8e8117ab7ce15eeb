package mesh

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// LoadIdentity reads dir/ca.crt, dir/NODE.crt and dir/NODE.key and checks
// that they belong together: the certificate is signed by the CA, is
// NODE's, is usable for client and server authentication, and matches
// the key; the key is not readable by group or others. The CA key is not
// needed (keep it off the nodes). Of several problems it returns the
// first; CheckIdentity lists them all.
func LoadIdentity(dir, node string) (*Identity, error) {
	id, _, problems := readIdentity(dir, node)
	if len(problems) > 0 {
		return nil, fmt.Errorf("mesh: %w", problems[0])
	}
	return id, nil
}

// CheckIdentity reports every problem LoadIdentity would refuse the files
// of dir for, each found on its own: a key readable by others, another
// node's certificate, an expired one and a CA it is not signed by are
// each named, not the first alone. cluster is the CA's cluster name, ""
// when ca.crt cannot be read as a cluster CA. Each problem names its
// file and wraps ErrCert (and the fs error of a file that cannot be
// read); it has no "mesh: " prefix, to be placed after the config key
// that names dir.
func CheckIdentity(dir, node string) (cluster string, problems []error) {
	_, cluster, problems = readIdentity(dir, node)
	return cluster, problems
}

// identityFiles are the files of an identity, named in its problems.
type identityFiles struct{ ca, cert, key string }

// filesOf are node's files in dir; with dir "", their bare names.
func filesOf(dir, node string) identityFiles {
	return identityFiles{ca: filepath.Join(dir, CAcertFile), cert: CertFile(dir, node), key: KeyFile(dir, node)}
}

// readIdentity is LoadIdentity and CheckIdentity: it goes on past each
// problem as far as the files it has read allow, and returns the
// Identity only when there is none. Reading the files is its own; the
// checks of what they hold are checkIdentity's, which NewIdentity shares.
func readIdentity(dir, node string) (*Identity, string, []error) {
	files := filesOf(dir, node)
	var problems []error
	bad := func(format string, a ...any) { problems = append(problems, fmt.Errorf(format, a...)) }

	p := IdentityPEM{Dir: dir} // a nil field: unread
	var ca *x509.Certificate
	if b, err := os.ReadFile(files.ca); err != nil {
		bad("%w: %w", ErrCert, err)
	} else if ca, err = parseCA(b, files.ca); err != nil {
		problems = append(problems, err)
	} else {
		p.CA = b
	}
	if st, err := os.Stat(files.key); err != nil {
		bad("%w: %w", ErrCert, err)
	} else {
		if st.Mode().Perm()&0o077 != 0 {
			bad("%s: mode %#o: a private key must not be readable by group or others (chmod 600): %w", files.key, st.Mode().Perm(), ErrCert)
		}
		if b, err := os.ReadFile(files.key); err != nil {
			bad("%w: %w", ErrCert, err)
		} else {
			p.Key = b
		}
	}
	if b, err := os.ReadFile(files.cert); err != nil {
		bad("%w: %w", ErrCert, err)
	} else {
		p.Cert = b
	}
	id, cluster, more := checkIdentity(node, files, ca, p)
	if problems = append(problems, more...); len(problems) > 0 {
		return nil, cluster, problems
	}
	return id, cluster, nil
}

// checkIdentity checks that p's certificate and key, of node, belong
// together and to ca (p.CA parsed; nil when it could not be read or
// parsed, its problem already told), naming files in each problem. A
// nil p.Cert or p.Key is one that could not be read, its problem told
// too: the checks that need it are skipped. It returns the Identity
// when it finds no problem.
func checkIdentity(node string, files identityFiles, ca *x509.Certificate, p IdentityPEM) (*Identity, string, []error) {
	certPath, keyPath, caPath := files.cert, files.key, files.ca
	certPEM, keyPEM := p.Cert, p.Key
	var problems []error
	bad := func(format string, a ...any) { problems = append(problems, fmt.Errorf(format, a...)) }

	var pair tls.Certificate
	var err error
	pairOK := false
	if certPEM != nil && keyPEM != nil {
		if pair, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
			bad("%s, %s: %w: %w", certPath, keyPath, ErrCert, err)
		} else {
			pairOK = true
		}
	}
	// The certificate alone, for the checks that do not need the key.
	var leaf *x509.Certificate
	if pairOK {
		leaf = pair.Leaf
	} else if certPEM != nil {
		var perr error
		if block, _ := pem.Decode(certPEM); block == nil || block.Type != "CERTIFICATE" {
			perr = fmt.Errorf("%s: no PEM certificate: %w", certPath, ErrCert)
		} else if leaf, err = x509.ParseCertificate(block.Bytes); err != nil {
			perr = fmt.Errorf("%s: %w: %w", certPath, ErrCert, err)
		}
		if perr != nil && keyPEM == nil {
			problems = append(problems, perr) // else the pair's problem said it
		}
	}
	if leaf != nil && leaf.Subject.CommonName != node {
		bad("%s: certificate of %q, want %q: %w", certPath, leaf.Subject.CommonName, node, ErrCert)
	}
	// An expired certificate is no stranger's: say so, and which; then
	// verify the chain at a time both are valid, so that a certificate
	// of another CA is named as well.
	now := time.Now()
	at, dated := now, false
	for _, c := range []struct {
		path, fix string
		cert      *x509.Certificate
	}{
		// A node's own certificate is renewed alone, by the CA that
		// signed it; the CA's end is every node's.
		{certPath, fmt.Sprintf("renew it with node cert add --certs DIR --node %s --force (where the CA key is) and restart this node alone", node), leaf},
		{caPath, "write new certificates (node cert init --force) for every node", ca},
	} {
		if c.cert == nil {
			continue
		}
		if d := outOfDate(c.cert, now); d != "" {
			err := fmt.Errorf("%s: %s: %s: %w", c.path, d, c.fix, ErrCert)
			if now.Before(c.cert.NotBefore) {
				err = notYetValid{err}
			}
			problems = append(problems, err)
			dated = true
		}
	}
	if leaf != nil && ca != nil {
		if dated {
			at = later(leaf.NotBefore, ca.NotBefore)
		}
		if !at.After(leaf.NotAfter) && !at.After(ca.NotAfter) {
			verifyLeaf(leaf, ca, at, certPath, caPath, bad)
		} else if err := leaf.CheckSignatureFrom(ca); err != nil {
			// Never valid at once: the signature alone.
			bad("%s: not signed by %s: %w: %w", certPath, caPath, ErrCert, err)
		}
		cluster := ca.Subject.Organization[0]
		if len(leaf.Subject.Organization) != 1 || leaf.Subject.Organization[0] != cluster {
			bad("%s: certificate names cluster %v, CA names %q: %w", certPath, leaf.Subject.Organization, cluster, ErrCert)
		}
	}
	cluster := ""
	if ca != nil {
		cluster = ca.Subject.Organization[0]
	}
	if len(problems) > 0 || ca == nil || !pairOK {
		return nil, cluster, problems // without the CA or the pair, the caller told why
	}
	// The reset key comes from the parsed private key, not from the file's
	// first PEM block: `openssl ecparam -genkey` writes the public "EC
	// PARAMETERS" block first, the same for every P-256 key. PKCS #8 is
	// what WriteCluster writes, so its keys keep the secret they had.
	keyDER, err := x509.MarshalPKCS8PrivateKey(pair.PrivateKey)
	if err != nil {
		return nil, cluster, []error{fmt.Errorf("%s: %w: %w", keyPath, ErrCert, err)}
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	id := &Identity{Cluster: cluster, Node: node, Cert: pair, Roots: roots, CA: ca, caFile: caPath, pem: p}
	id.resetKey = sha256.Sum256(append([]byte("graphnode stateless reset v1\x00"), keyDER...))
	return id, cluster, nil
}

// parseCA parses caPEM, read from caPath, as a cluster CA's certificate.
func parseCA(caPEM []byte, caPath string) (*x509.Certificate, error) {
	block, rest := pem.Decode(caPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM certificate: %w", caPath, ErrCert)
	}
	// A node trusts the first certificate alone: a second CA would look
	// trusted and not be, and a key would be copied to every host.
	if next, _ := pem.Decode(rest); next != nil {
		return nil, fmt.Errorf("%s: a %q PEM block after the CA's certificate: want the cluster CA's certificate alone (node cert init's ca.crt): %w", caPath, next.Type, ErrCert)
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", caPath, ErrCert, err)
	}
	if !ca.IsCA || len(ca.Subject.Organization) != 1 {
		return nil, fmt.Errorf("%s: not a graphnode cluster CA (want a CA certificate naming the cluster as its Organization): %w", caPath, ErrCert)
	}
	return ca, nil
}

// verifyLeaf checks at time at that leaf is signed by ca and allows TLS
// server and client authentication, telling bad each problem.
func verifyLeaf(leaf, ca *x509.Certificate, at time.Time, certPath, caPath string, bad func(string, ...any)) {
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	// One usage at a time: Verify accepts a certificate that allows any
	// one of the usages it is given, and a node is both a TLS server (to
	// its peers' clients) and a TLS client (to their servers).
	for _, u := range []struct {
		usage x509.ExtKeyUsage
		name  string
	}{{x509.ExtKeyUsageServerAuth, "server"}, {x509.ExtKeyUsageClientAuth, "client"}} {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{u.usage}, CurrentTime: at})
		var ie x509.CertificateInvalidError
		switch {
		case err == nil:
		case errors.As(err, &ie) && ie.Reason == x509.IncompatibleUsage:
			bad("%s: its extended key usage does not allow TLS %s authentication, which every node needs (node cert init writes certificates for both): %w: %w", certPath, u.name, ErrCert, err)
		default:
			bad("%s: not signed by %s: %w: %w", certPath, caPath, ErrCert, err)
			return // the same for the other usage
		}
	}
}

// outOfDate says how now falls outside cert's validity, "" when it is
// inside.
func outOfDate(cert *x509.Certificate, now time.Time) string {
	switch {
	case now.After(cert.NotAfter):
		return "expired at " + cert.NotAfter.UTC().Format(time.RFC3339)
	case now.Before(cert.NotBefore):
		return "not valid before " + cert.NotBefore.UTC().Format(time.RFC3339) + " (is this host's clock behind?)"
	}
	return ""
}

// fileExists reports whether path names something (a stat that fails
// otherwise counts as there: the write that follows will say why).
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// notYetValid is a problem of a certificate whose validity has not
// begun: errors.Is(err, ErrNotYetValid), its text unchanged.
type notYetValid struct{ error }

func (e notYetValid) Is(target error) bool { return target == ErrNotYetValid }
func (e notYetValid) Unwrap() error        { return e.error }
