package mesh

import (
	"crypto/x509"
	"fmt"
	"log/slog"
)

// IdentityPEM is an Identity as the PEM it was built from: what a process
// hands a child process that is to be the same node (a sampler dialling
// its node's peers), so that both go by the identity the parent loaded,
// not by whatever the files hold by the time the child starts. It holds
// the private key: pass it over a pipe, never in a file, argv or the
// environment. Its fmt and slog forms leave the key out.
type IdentityPEM struct {
	Cert []byte `json:"cert"` // the node's certificate
	Key  []byte `json:"key"`  // its private key
	CA   []byte `json:"ca"`   // the cluster CA's certificate
	// Dir is the directory the files were read from, "" if none. It
	// names them in NewIdentity's messages alone.
	Dir string `json:"dir,omitempty"`
}

// PEM is the certificate, key and CA id was built from (LoadIdentity's
// files, or NewIdentity's p), for NewIdentity in another process.
func (id *Identity) PEM() IdentityPEM { return id.pem }

// NewIdentity builds node's Identity from p with the checks LoadIdentity
// applies to the files, but the key file's mode: the certificate is
// signed by the CA, is node's, is usable for client and server
// authentication, is valid now, and matches the key. Its errors name
// the files as p.Dir's, and wrap ErrCert.
func NewIdentity(node string, p IdentityPEM) (*Identity, error) {
	files := filesOf(p.Dir, node)
	var problems []error
	// An empty field is one not read: say so, and let checkIdentity skip
	// what needs it.
	var ca *x509.Certificate
	if len(p.CA) == 0 {
		problems = append(problems, fmt.Errorf("%s: no PEM data: %w", files.ca, ErrCert))
	} else {
		var err error
		if ca, err = parseCA(p.CA, files.ca); err != nil {
			problems = append(problems, err)
		}
	}
	if len(p.Key) == 0 {
		problems = append(problems, fmt.Errorf("%s: no PEM data: %w", files.key, ErrCert))
		p.Key = nil
	}
	if len(p.Cert) == 0 {
		problems = append(problems, fmt.Errorf("%s: no PEM data: %w", files.cert, ErrCert))
		p.Cert = nil
	}
	id, _, more := checkIdentity(node, files, ca, p)
	if problems = append(problems, more...); len(problems) > 0 {
		return nil, fmt.Errorf("mesh: %w", problems[0])
	}
	return id, nil
}

// Format prints p without its key, whatever the verb: a spec or config
// printed whole (%v, %+v, %#v) shows how large each part is, never the
// private key.
func (p IdentityPEM) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "mesh.IdentityPEM{Cert: %d bytes, Key: withheld, CA: %d bytes, Dir: %q}", len(p.Cert), len(p.CA), p.Dir)
}

// LogValue is p in a log record, without its key.
func (p IdentityPEM) LogValue() slog.Value {
	return slog.GroupValue(slog.Int("cert_bytes", len(p.Cert)), slog.String("key", "withheld"),
		slog.Int("ca_bytes", len(p.CA)), slog.String("dir", p.Dir))
}

// Format prints id without its key, whatever the verb: its node,
// cluster and CA file. Printed field by field, the PEM it keeps (an
// unexported field, whose Format fmt does not ask) showed every byte of
// the key, and a verb other than %v the tls.Certificate's key in full.
func (id Identity) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "mesh.Identity{node %q, cluster %q, CA %q, key withheld}", id.Node, id.Cluster, id.caFile)
}

// LogValue is id in a log record, without its key: a JSON log encoded
// the tls.Certificate's key in full.
func (id Identity) LogValue() slog.Value {
	return slog.GroupValue(slog.String("node", id.Node), slog.String("cluster", id.Cluster),
		slog.String("ca", id.caFile), slog.String("key", "withheld"))
}
