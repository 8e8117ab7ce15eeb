package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"graphnode/mesh"
)

func TestCertInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	var o, e bytes.Buffer
	code := run(context.Background(), []string{"cert", "init", "--cluster", "products", "--nodes", "host0,host1", "-o", dir, "--days", "30"}, &o, &e)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, e.String())
	}
	if !strings.Contains(o.String(), `cluster "products" and 2 node certificates`) {
		t.Fatalf("stdout %q", o.String())
	}
	for _, f := range []string{"ca.crt", "ca.key", "host0.crt", "host0.key", "host1.crt", "host1.key"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %#o, want 0600", f, st.Mode().Perm())
		}
	}
	roots := x509.NewCertPool()
	roots.AddCert(readCert(t, filepath.Join(dir, "ca.crt")))
	for _, n := range []string{"host0", "host1"} {
		c := readCert(t, filepath.Join(dir, n+".crt"))
		if _, err := c.Verify(x509.VerifyOptions{Roots: roots, DNSName: n,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s: %v", n, err)
		}
		if d := c.NotAfter.Sub(c.NotBefore); d != 30*24*time.Hour {
			t.Errorf("%s: validity %v, want 30 days", n, d)
		}
		id, err := mesh.LoadIdentity(dir, n)
		if err != nil || id.Cluster != "products" {
			t.Errorf("LoadIdentity(%s) = %v", n, err)
		}
	}

	// A second run refuses to replace the CA; --force does.
	e.Reset()
	if code := run(context.Background(), []string{"cert", "init", "--cluster", "products", "--nodes", "host0", "-o", dir}, &o, &e); code != 1 ||
		!strings.Contains(e.String(), "ca.key exists") {
		t.Fatalf("second run: exit %d, %s", code, e.String())
	}
	// With ca.key kept off the directory (as the help advises), ca.crt
	// still stands for a live cluster.
	if err := os.Rename(filepath.Join(dir, "ca.key"), filepath.Join(t.TempDir(), "ca.key")); err != nil {
		t.Fatal(err)
	}
	e.Reset()
	if code := run(context.Background(), []string{"cert", "init", "--cluster", "products", "--nodes", "host0", "-o", dir}, &o, &e); code != 1 ||
		!strings.Contains(e.String(), "ca.crt exists") {
		t.Fatalf("run with ca.key moved away: exit %d, %s", code, e.String())
	}
	if code := run(context.Background(), []string{"cert", "init", "--cluster", "products", "--nodes", "host0", "-o", dir, "--force"}, &o, &e); code != 0 {
		t.Fatalf("--force: exit %d, %s", code, e.String())
	}
	// --days past a hundred years is refused (it overflowed a Duration
	// and silently became ten years).
	e.Reset()
	if code := run(context.Background(), []string{"cert", "init", "--cluster", "products", "--nodes", "host0", "-o", t.TempDir(), "--days", "106752"}, &o, &e); code != 2 ||
		!strings.Contains(e.String(), "--days 106752: want 1 to 36500 days") {
		t.Fatalf("--days 106752: exit %d, %s", code, e.String())
	}
}

// TestCertAdd: node cert add signs one more node with the CA node cert
// init wrote, leaving the other nodes' files as they were; it refuses to
// replace a node's files without --force, and a directory without the
// CA's key.
func TestCertAdd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	if code, _, stderr := runNode(t, "cert", "init", "--cluster", "products", "--nodes", "host0,host1", "-o", dir); code != 0 {
		t.Fatalf("cert init: exit %d: %s", code, stderr)
	}
	host0, err := os.ReadFile(filepath.Join(dir, "host0.crt"))
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runNode(t, "cert", "add", "--certs", dir, "--node", "trainer7", "--days", "30")
	if code != 0 || !strings.Contains(stdout, `wrote the certificate of node "trainer7" of cluster "products" to `+dir) {
		t.Fatalf("cert add: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	for _, f := range []string{"trainer7.crt", "trainer7.key"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want mode 0600", f, st, err)
		}
	}
	id, err := mesh.LoadIdentity(dir, "trainer7")
	if err != nil || id.Cluster != "products" {
		t.Fatalf("LoadIdentity(trainer7) = %v", err)
	}
	if d := id.Cert.Leaf.NotAfter.Sub(id.Cert.Leaf.NotBefore); d != 30*24*time.Hour {
		t.Errorf("trainer7: validity %v, want 30 days", d)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "host0.crt")); err != nil || !bytes.Equal(b, host0) {
		t.Errorf("host0.crt changed by cert add: %v", err)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--certs", dir, "--node", "trainer7"}, 1, "trainer7.crt exists: node trainer7 has a certificate (node cert add --force replaces it"},
		{[]string{"--certs", dir, "--node", "host1"}, 1, "host1.crt exists"},
		{[]string{"--certs", dir, "--node", "host1", "--force"}, 0, `wrote the certificate of node "host1"`},
		{[]string{"--certs", filepath.Join(t.TempDir(), "none"), "--node", "h"}, 1, "ca.key: a node is signed by the cluster CA's certificate and key"},
		{[]string{"--certs", dir, "--node", "a/b"}, 2, `node cert add: --node "a/b": mesh: node name "a/b"`},
	} {
		code, stdout, stderr := runNode(t, append([]string{"cert", "add"}, tc.args...)...)
		if code != tc.code || !strings.Contains(stdout+stderr, tc.want) {
			t.Errorf("cert add %v: exit %d, want %d and %q\nstdout: %s\nstderr: %s", tc.args, code, tc.code, tc.want, stdout, stderr)
		}
	}
}

func TestCertUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"cert"}, 2, "usage: node cert init|add"},
		{[]string{"cert", "renew"}, 2, "add   sign a certificate for one more node"},
		{[]string{"cert", "add", "--help"}, 0, "-certs"},
		{[]string{"cert", "add", "--node", "h"}, 2, "node cert add: missing --certs"},
		// A bad flag value is a usage error, exit 2, as for node train,
		// kge and fetch (it was 1, as for a failure to write).
		{[]string{"cert", "add", "--certs", "x", "--node", "h", "--days", "0"}, 2, "node cert add: --days 0: want 1 to 36500 days\n"},
		{[]string{"cert", "add", "--certs", "x", "--node", "a b"}, 2, `node cert add: --node "a b": mesh: node name "a b"`},
		{[]string{"cert", "init", "--help"}, 0, "-cluster"},
		{[]string{"cert", "init", "--cluster", "c"}, 2, "missing --nodes, -o"},
		{[]string{"cert", "init", "--cluster", "c", "--nodes", "a/b", "-o", "x"}, 2, `node cert init: --nodes "a/b": mesh: node name "a/b"`},
		{[]string{"cert", "init", "--cluster", "c", "--nodes", "a,,b", "-o", "x"}, 2, `node cert init: --nodes "a,,b": mesh: node name ""`},
		// It said "character 'Ã' not allowed": the check read bytes.
		{[]string{"cert", "init", "--cluster", "c", "--nodes", "é,b", "-o", "x"}, 2, `node cert init: --nodes "é,b": mesh: node name "é": character 'é' not allowed: want ASCII letters, digits, '.', '-', '_'`},
		{[]string{"cert", "init", "--cluster", "c", "--nodes", "a,b,a", "-o", "x"}, 2, `node cert init: --nodes "a,b,a": mesh: node "a" listed twice`},
		{[]string{"cert", "init", "--cluster", "c", "--nodes", "a,ca", "-o", "x"}, 2, `node cert init: --nodes "a,ca": mesh: node name "ca" is reserved for the CA files`},
		{[]string{"cert", "init", "--cluster", "c", "--nodes", "a,a,b/c,a", "-o", "x"}, 2,
			"node cert init: --nodes \"a,a,b/c,a\": mesh: node \"a\" listed twice\nnode cert init: --nodes \"a,a,b/c,a\": mesh: node name \"b/c\""},
		{[]string{"cert", "add", "--certs", "x", "--node", "ca"}, 2, `node cert add: --node "ca": mesh: node name "ca" is reserved for the CA files`},
		{[]string{"cert", "init", "--cluster", "c d", "--nodes", "a", "-o", "x"}, 2, `node cert init: --cluster "c d": mesh: cluster name "c d"`},
		{[]string{"cert", "init", "--cluster", "c", "--nodes", "a", "-o", "x", "--days", "0"}, 2, "node cert init: --days 0: want 1 to 36500 days\n"},
		// It said "x/ca.key exists: a new CA would lock out every node".
		{[]string{"cert", "init", "--cluster", "c", "--nodes", "a", "-o", "cert_test.go"}, 2, `node cert init: -o "cert_test.go" is a file, not a directory`},
	} {
		var o, e bytes.Buffer
		code := run(context.Background(), tc.args, &o, &e)
		if code != tc.code || !strings.Contains(e.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d containing %q", tc.args, code, e.String(), tc.code, tc.want)
		}
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
