package mesh

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestWriteCluster(t *testing.T) {
	dir := writeTestCluster(t, "products", "host0", "host1", "10.0.0.7")
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v, %v", st.Mode(), err)
	}
	files, _ := os.ReadDir(dir)
	var names []string
	for _, f := range files {
		names = append(names, f.Name())
		info, _ := f.Info()
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %#o, want 0600", f.Name(), info.Mode().Perm())
		}
	}
	want := []string{"10.0.0.7.crt", "10.0.0.7.key", "ca.crt", "ca.key", "host0.crt", "host0.key", "host1.crt", "host1.key"}
	if !slices.Equal(names, want) {
		t.Fatalf("files %v, want %v", names, want)
	}
	id := loadID(t, dir, "host1")
	if id.Cluster != "products" || id.Node != "host1" {
		t.Fatalf("identity %q %q", id.Cluster, id.Node)
	}
	if id.CA.Subject.CommonName != "graphnode CA products" || !id.CA.IsCA || !id.CA.MaxPathLenZero {
		t.Fatalf("CA subject %v", id.CA.Subject)
	}
	leaf := id.Cert.Leaf
	if !slices.Equal(leaf.DNSNames, []string{"host1"}) || len(leaf.IPAddresses) != 2 ||
		!leaf.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) || !leaf.IPAddresses[1].Equal(net.IPv6loopback) {
		t.Fatalf("SANs %v %v", leaf.DNSNames, leaf.IPAddresses)
	}
	if !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}) {
		t.Fatalf("ext key usage %v", leaf.ExtKeyUsage)
	}
	if pk, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || pk.Curve != elliptic.P256() {
		t.Fatalf("key %T, want ECDSA P-256", leaf.PublicKey)
	}
	if d := leaf.NotAfter.Sub(leaf.NotBefore); d != DefaultCertValidity {
		t.Fatalf("validity %v", d)
	}
	ipNode := loadID(t, dir, "10.0.0.7")
	if ips := ipNode.Cert.Leaf.IPAddresses; len(ips) != 3 || !ips[2].Equal(net.ParseIP("10.0.0.7")) {
		t.Fatalf("IP node SANs %v", ips)
	}
	// The reset key is stable across loads (restarts) and differs per node.
	if loadID(t, dir, "host1").resetKey != id.resetKey || loadID(t, dir, "host0").resetKey == id.resetKey {
		t.Fatal("stateless reset key not derived from the node key")
	}
}

func TestWriteClusterOverwrite(t *testing.T) {
	dir := writeTestCluster(t, "c", "host0")
	ca1 := loadID(t, dir, "host0").CA
	err := WriteCluster(dir, ClusterSpec{Cluster: "c", Nodes: []string{"host0"}})
	// The flag a user passes, not the field a caller sets.
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), filepath.Join(dir, "ca.key")) || !strings.Contains(err.Error(), "node cert init --force replaces it") {
		t.Fatalf("err = %v, want ErrExist naming ca.key and node cert init --force", err)
	}
	if !loadID(t, dir, "host0").CA.Equal(ca1) {
		t.Fatal("refused run changed the CA")
	}
	if err := WriteCluster(dir, ClusterSpec{Cluster: "c", Nodes: []string{"host0"}, Force: true, Validity: 48 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	id := loadID(t, dir, "host0")
	if id.CA.Equal(ca1) || id.Cert.Leaf.NotAfter.Sub(id.Cert.Leaf.NotBefore) != 48*time.Hour {
		t.Fatal("forced run did not write a new CA with the given validity")
	}
}

// TestAddNode: AddNode signs one more node with the CA of a directory
// node cert init wrote; the new node and the old ones handshake both
// ways. It refuses to overwrite a node's files without Force, and names
// what is missing or wrong.
func TestAddNode(t *testing.T) {
	dir := writeTestCluster(t, "c", "host0")
	ca := loadID(t, dir, "host0").CA
	leaf, err := AddNode(dir, NodeSpec{Node: "host5", Validity: 2 * DefaultCertValidity})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{CertFile(dir, "host5"), KeyFile(dir, "host5")} {
		if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want mode 0600", f, st, err)
		}
	}
	id := loadID(t, dir, "host5")
	if id.Cluster != "c" || id.Node != "host5" || !id.CA.Equal(ca) || !id.Cert.Leaf.Equal(leaf) {
		t.Fatalf("identity of host5: cluster %q node %q", id.Cluster, id.Node)
	}
	// Twenty years would pass the CA's end: the chain would fail then.
	if !leaf.NotAfter.Equal(ca.NotAfter) {
		t.Errorf("host5 valid until %v, want the CA's end %v", leaf.NotAfter, ca.NotAfter)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 6 {
		t.Errorf("%d files in %s, want 6 (no temporary file left)", len(ents), dir)
	}

	// host5 talks to host0 (made by init), and host0 to host5.
	old := startServer(t, dir, "host0", 1, "127.0.0.1:0", nil)
	if err := checkSample(newTestClient(t, id, map[int]Peer{1: old.peer()}, nil), 1, &SampleRequest{Fanout: 2, IDs: ids(4, 0)}); err != nil {
		t.Fatalf("host5 to host0: %v", err)
	}
	added := startServer(t, dir, "host5", 1, "127.0.0.1:0", nil)
	if err := checkSample(newTestClient(t, loadID(t, dir, "host0"), map[int]Peer{1: added.peer()}, nil), 1, &SampleRequest{Fanout: 2, IDs: ids(4, 0)}); err != nil {
		t.Fatalf("host0 to host5: %v", err)
	}

	for _, node := range []string{"host5", "host0"} {
		_, err := AddNode(dir, NodeSpec{Node: node})
		if want := node + ".crt exists"; !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--force") {
			t.Errorf("AddNode(%s) again: %v, want ErrExist, %q and --force", node, err, want)
		}
	}
	if !loadID(t, dir, "host5").Cert.Leaf.Equal(leaf) {
		t.Fatal("a refused AddNode changed host5's certificate")
	}
	forced, err := AddNode(dir, NodeSpec{Node: "host5", Force: true, Validity: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if forced.Equal(leaf) || forced.NotAfter.Sub(forced.NotBefore) != 48*time.Hour || !loadID(t, dir, "host5").Cert.Leaf.Equal(forced) {
		t.Errorf("Force wrote %v to %v, want a new certificate of 48 h", forced.NotBefore, forced.NotAfter)
	}
}

// TestAddNodeErrors: AddNode writes nothing when the CA's files are
// missing, do not belong together or expired, or the name is bad.
func TestAddNodeErrors(t *testing.T) {
	other := writeTestCluster(t, "c", "host0")
	expired := filepath.Join(t.TempDir(), "expired")
	if err := WriteCluster(expired, ClusterSpec{Cluster: "c", Nodes: []string{"host0"}, NotBefore: time.Now().Add(-72 * time.Hour), Validity: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		setup func(d string) string // the directory to add to
		node  string
		is    error
		want  string
	}{
		{"no ca.key", func(d string) string { os.Remove(filepath.Join(d, CAKeyFile)); return d }, "host5", fs.ErrNotExist,
			"ca.key: a node is signed by the cluster CA's certificate and key"},
		{"no CA at all", func(string) string { return filepath.Join(t.TempDir(), "none") }, "host5", fs.ErrNotExist, "ca.crt, "},
		{"key of another CA", func(d string) string {
			copyFile(t, filepath.Join(other, CAKeyFile), filepath.Join(d, CAKeyFile))
			return d
		}, "host5", ErrCert,
			"private key does not match"},
		{"expired CA", func(string) string { return expired }, "host5", ErrCert, "ca.crt: expired at"},
		{"bad name", func(d string) string { return d }, "a/b", nil, `node name "a/b"`},
		{"CA's name", func(d string) string { return d }, "ca", nil, `node name "ca" is reserved`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.setup(writeTestCluster(t, "c", "host0"))
			_, err := AddNode(d, NodeSpec{Node: tc.node})
			if err == nil || tc.is != nil && !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant %v containing %q", err, tc.is, tc.want)
			}
			if _, err := os.Stat(CertFile(d, tc.node)); err == nil && tc.node != "ca" {
				t.Errorf("%s written by a refused AddNode", CertFile(d, tc.node))
			}
		})
	}
}

func TestWriteClusterNames(t *testing.T) {
	err := WriteCluster(t.TempDir(), ClusterSpec{Cluster: "a b", Nodes: []string{"x/y", "", ".h", "ca", "h", "h"}})
	for _, want := range []string{`cluster name "a b": character ' '`, `node name "x/y"`, `node name ""`, `node name ".h": must not start`,
		`"ca" is reserved`, `node "h" listed twice`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant it to mention %s", err, want)
		}
	}
}

// TestCheckName: a name is ASCII letters, digits, '.', '-', '_'; a
// character outside them is named as typed (by bytes, "é" was the
// character 'Ã'), a byte that is not UTF-8 as a byte.
func TestCheckName(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"node-1.x_Y", ""},
		{"é", `mesh: node name "é": character 'é' not allowed: want ASCII letters, digits, '.', '-', '_'`},
		{"host1\u200b", `mesh: node name "host1\u200b": character '\u200b' not allowed`},
		{"b\xff", `mesh: node name "b\xff": byte 0xff (not UTF-8) not allowed`},
		{"a b", `mesh: node name "a b": character ' ' not allowed`},
		{"", `mesh: node name "": want 1 to 253 characters`},
		{strings.Repeat("a", 254), "want 1 to 253 characters"},
		{"-a", `mesh: node name "-a": must not start with '-'`},
	} {
		err := CheckName("node", tc.name)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckName(%q) = %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestLoadIdentityErrors(t *testing.T) {
	dir := writeTestCluster(t, "c", "host0", "host1")
	other := writeTestCluster(t, "c", "host0")
	tests := []struct {
		name  string
		setup func(d string)
		node  string
		want  string
	}{
		{"missing node", func(string) {}, "host9", "host9.key: no such file"},
		{"key readable by others", func(d string) { os.Chmod(KeyFile(d, "host0"), 0o644) }, "host0", "mode 0644: a private key must not be readable"},
		{"certificate of another CA", func(d string) {
			copyFile(t, CertFile(other, "host0"), CertFile(d, "host0"))
			copyFile(t, KeyFile(other, "host0"), KeyFile(d, "host0"))
		}, "host0", "host0.crt: not signed by"},
		{"certificate of another node", func(d string) {
			copyFile(t, CertFile(d, "host1"), CertFile(d, "host0"))
			copyFile(t, KeyFile(d, "host1"), KeyFile(d, "host0"))
		}, "host0", `certificate of "host1", want "host0"`},
		{"key does not match", func(d string) { copyFile(t, KeyFile(d, "host1"), KeyFile(d, "host0")) }, "host0", "private key does not match"},
		{"no CA", func(d string) { os.Remove(filepath.Join(d, CAcertFile)) }, "host0", "ca.crt: no such file"},
		// Only the first certificate of ca.crt was read: a second CA
		// (appended to trust two while rotating) looked trusted and was
		// not, and the CA's key pasted in went to every host unnoticed.
		{"CA file with a second CA", func(d string) { appendFile(t, filepath.Join(other, CAcertFile), filepath.Join(d, CAcertFile)) },
			"host0", `ca.crt: a "CERTIFICATE" PEM block after the CA's certificate`},
		{"CA file with the CA key", func(d string) { appendFile(t, filepath.Join(dir, CAKeyFile), filepath.Join(d, CAcertFile)) },
			"host0", `ca.crt: a "PRIVATE KEY" PEM block after the CA's certificate`},
		// A node is a TLS server and a TLS client: a certificate that
		// allows one only is refused here, not by every peer's handshake.
		{"server authentication only", func(d string) {
			copyFile(t, filepath.Join(dir, CAKeyFile), filepath.Join(d, CAKeyFile))
			reissue(t, d, "host0", time.Now().Add(-time.Hour), time.Now().Add(time.Hour), x509.ExtKeyUsageServerAuth)
		}, "host0", "host0.crt: its extended key usage does not allow TLS client authentication"},
		{"client authentication only", func(d string) {
			copyFile(t, filepath.Join(dir, CAKeyFile), filepath.Join(d, CAKeyFile))
			reissue(t, d, "host0", time.Now().Add(-time.Hour), time.Now().Add(time.Hour), x509.ExtKeyUsageClientAuth)
		}, "host0", "host0.crt: its extended key usage does not allow TLS server authentication"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := t.TempDir()
			for _, f := range []string{CAcertFile, "host0.crt", "host0.key", "host1.crt", "host1.key"} {
				copyFile(t, filepath.Join(dir, f), filepath.Join(d, f))
			}
			tt.setup(d)
			_, err := LoadIdentity(d, tt.node)
			if !errors.Is(err, ErrCert) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v\nwant ErrCert containing %q", err, tt.want)
			}
		})
	}
}

// The stateless-reset key is derived from the private key, however the
// key file encodes it: `openssl ecparam -genkey` writes a public "EC
// PARAMETERS" block (the same for every P-256 key) before an SEC 1 "EC
// PRIVATE KEY" block. Such a file gives the key WriteCluster's PKCS #8
// file gives, and two nodes never share one.
func TestResetKeyFromPrivateKey(t *testing.T) {
	const params = "-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n"
	dir := writeTestCluster(t, testCluster, "host0", "host1")
	var written, openssl [][32]byte
	for _, node := range []string{"host0", "host1"} {
		id := loadID(t, dir, node)
		written = append(written, id.resetKey)
		sec1, err := x509.MarshalECPrivateKey(id.Cert.PrivateKey.(*ecdsa.PrivateKey))
		if err != nil {
			t.Fatal(err)
		}
		b := append([]byte(params), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1})...)
		if err := os.WriteFile(KeyFile(dir, node), b, 0o600); err != nil {
			t.Fatal(err)
		}
		openssl = append(openssl, loadID(t, dir, node).resetKey)
	}
	if openssl[0] == openssl[1] {
		t.Fatalf("two nodes' keys in openssl's layout give the same reset key %x", openssl[0][:8])
	}
	if !slices.Equal(openssl, written) {
		t.Fatal("the same key gives another reset key in openssl's layout than in WriteCluster's")
	}
}

// copyFile writes a copy of from at to (mode 0600).
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// appendFile appends the bytes of from to the file to.
func appendFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(to, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCheckIdentityListsEveryProblem: CheckIdentity names each problem
// of the files, found on its own, where LoadIdentity stops at the first:
// a key readable by others hid another node's certificate, and an
// expired certificate hid that another CA signed it.
func TestCheckIdentityListsEveryProblem(t *testing.T) {
	dir := writeTestCluster(t, "c", "host0", "host1")
	other := writeTestCluster(t, "c2", "host0")
	reissue(t, other, "host0", time.Now().Add(-72*time.Hour), time.Now().Add(-24*time.Hour))
	// Expired after the CA of dir began: verified at a time both are valid.
	lately := writeTestCluster(t, "c2", "host0")
	reissue(t, lately, "host0", time.Now().Add(-72*time.Hour), time.Now().Add(-30*time.Minute))
	// Expired, signed by dir's CA.
	sameCA := t.TempDir()
	for _, f := range []string{CAcertFile, CAKeyFile} {
		copyFile(t, filepath.Join(dir, f), filepath.Join(sameCA, f))
	}
	reissue(t, sameCA, "host0", time.Now().Add(-72*time.Hour), time.Now().Add(-30*time.Minute))
	tests := []struct {
		name  string
		setup func(d string)
		want  []string
	}{
		{"good", func(string) {}, nil},
		{"key readable by others, certificate of another node", func(d string) {
			copyFile(t, CertFile(d, "host1"), CertFile(d, "host0"))
			os.Chmod(KeyFile(d, "host0"), 0o644)
		}, []string{"host0.key: mode 0644", "private key does not match", `host0.crt: certificate of "host1", want "host0"`}},
		{"expired, of another CA", func(d string) {
			copyFile(t, CertFile(other, "host0"), CertFile(d, "host0"))
			copyFile(t, KeyFile(other, "host0"), KeyFile(d, "host0"))
		}, []string{"host0.crt: expired at", "host0.crt: not signed by", `host0.crt: certificate names cluster [c2], CA names "c"`}},
		{"expired within the CA's validity, of another CA", func(d string) {
			copyFile(t, CertFile(lately, "host0"), CertFile(d, "host0"))
			copyFile(t, KeyFile(lately, "host0"), KeyFile(d, "host0"))
		}, []string{"host0.crt: expired at", "host0.crt: not signed by", `host0.crt: certificate names cluster [c2], CA names "c"`}},
		// A node's own certificate is renewed alone: the advice was to
		// write new certificates for every node.
		{"expired, of this CA", func(d string) {
			copyFile(t, CertFile(sameCA, "host0"), CertFile(d, "host0"))
			copyFile(t, KeyFile(sameCA, "host0"), KeyFile(d, "host0"))
		}, []string{"renew it with node cert add --certs DIR --node host0 --force (where the CA key is) and restart this node alone"}},
		{"no CA, key readable by others", func(d string) {
			os.Remove(filepath.Join(d, CAcertFile))
			os.Chmod(KeyFile(d, "host0"), 0o644)
		}, []string{"ca.crt: no such file", "host0.key: mode 0644"}},
		{"no certificate, key readable by others", func(d string) {
			os.Remove(CertFile(d, "host0"))
			os.Chmod(KeyFile(d, "host0"), 0o644)
		}, []string{"host0.key: mode 0644", "host0.crt: no such file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := t.TempDir()
			for _, f := range []string{CAcertFile, "host0.crt", "host0.key", "host1.crt", "host1.key"} {
				copyFile(t, filepath.Join(dir, f), filepath.Join(d, f))
			}
			tt.setup(d)
			cluster, problems := CheckIdentity(d, "host0")
			if want := "c"; tt.name != "no CA, key readable by others" && cluster != want {
				t.Errorf("cluster %q, want %q", cluster, want)
			}
			if len(problems) != len(tt.want) {
				t.Fatalf("%d problems, want %d: %v", len(problems), len(tt.want), problems)
			}
			for i, p := range problems {
				if !errors.Is(p, ErrCert) || !strings.Contains(p.Error(), tt.want[i]) || strings.HasPrefix(p.Error(), "mesh: ") {
					t.Errorf("problem %d = %v\nwant ErrCert containing %q, with no package prefix", i, p, tt.want[i])
				}
			}
			if _, err := LoadIdentity(d, "host0"); (err == nil) != (tt.want == nil) || err != nil && !strings.Contains(err.Error(), tt.want[0]) {
				t.Errorf("LoadIdentity: %v, want the first problem", err)
			}
		})
	}
}
