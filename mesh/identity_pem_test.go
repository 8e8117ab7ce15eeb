package mesh

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readPEM is node's files in dir as an IdentityPEM.
func readPEM(t *testing.T, dir, node string) IdentityPEM {
	t.Helper()
	p := IdentityPEM{Dir: dir}
	for _, f := range []struct {
		path string
		to   *[]byte
	}{{CertFile(dir, node), &p.Cert}, {KeyFile(dir, node), &p.Key}, {filepath.Join(dir, CAcertFile), &p.CA}} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		*f.to = b
	}
	return p
}

// TestNewIdentityAsLoadIdentity: NewIdentity accepts and refuses what
// LoadIdentity does of the same bytes, with the same error, and what it
// accepts is the same identity (certificate, CA, reset key), which PEM
// gives back to build it again.
func TestNewIdentityAsLoadIdentity(t *testing.T) {
	dir := writeTestCluster(t, "c", "host0", "host1")
	other := writeTestCluster(t, "c", "host0")
	expired := writeTestCluster(t, "c", "host0")
	reissue(t, expired, "host0", time.Now().Add(-72*time.Hour), time.Now().Add(-24*time.Hour))
	tests := []struct {
		name  string
		setup func(d string)
		want  string // "": accepted
	}{
		{"good", func(string) {}, ""},
		{"key of another node", func(d string) { copyFile(t, KeyFile(d, "host1"), KeyFile(d, "host0")) }, "private key does not match"},
		{"certificate of another CA", func(d string) {
			copyFile(t, CertFile(other, "host0"), CertFile(d, "host0"))
			copyFile(t, KeyFile(other, "host0"), KeyFile(d, "host0"))
		}, "host0.crt: not signed by"},
		{"CA of another cluster run", func(d string) { copyFile(t, filepath.Join(other, CAcertFile), filepath.Join(d, CAcertFile)) },
			"host0.crt: not signed by"},
		{"expired", func(d string) {
			copyFile(t, CertFile(expired, "host0"), CertFile(d, "host0"))
			copyFile(t, KeyFile(expired, "host0"), KeyFile(d, "host0"))
		}, "host0.crt: expired at"},
		{"certificate of another node", func(d string) {
			copyFile(t, CertFile(d, "host1"), CertFile(d, "host0"))
			copyFile(t, KeyFile(d, "host1"), KeyFile(d, "host0"))
		}, `certificate of "host1", want "host0"`},
		{"CA file with the CA key", func(d string) { appendFile(t, filepath.Join(dir, CAKeyFile), filepath.Join(d, CAcertFile)) },
			`ca.crt: a "PRIVATE KEY" PEM block after the CA's certificate`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := t.TempDir()
			for _, f := range []string{CAcertFile, "host0.crt", "host0.key", "host1.crt", "host1.key"} {
				copyFile(t, filepath.Join(dir, f), filepath.Join(d, f))
			}
			tt.setup(d)
			fromFiles, ferr := LoadIdentity(d, "host0")
			fromPEM, perr := NewIdentity("host0", readPEM(t, d, "host0"))
			if tt.want != "" {
				if !errors.Is(perr, ErrCert) || !strings.Contains(perr.Error(), tt.want) {
					t.Fatalf("NewIdentity: %v\nwant ErrCert containing %q", perr, tt.want)
				}
				if ferr == nil || ferr.Error() != perr.Error() {
					t.Fatalf("NewIdentity: %v\nLoadIdentity: %v\nwant the same error", perr, ferr)
				}
				return
			}
			if ferr != nil || perr != nil {
				t.Fatalf("LoadIdentity: %v, NewIdentity: %v", ferr, perr)
			}
			again, err := NewIdentity("host0", fromFiles.PEM())
			if err != nil {
				t.Fatalf("NewIdentity of LoadIdentity's PEM: %v", err)
			}
			for _, id := range []*Identity{fromPEM, again} {
				if !bytes.Equal(id.Cert.Certificate[0], fromFiles.Cert.Certificate[0]) || !id.CA.Equal(fromFiles.CA) ||
					id.resetKey != fromFiles.resetKey || id.Cluster != "c" || id.Node != "host0" || id.caFile != fromFiles.caFile {
					t.Errorf("identity from PEM differs from the files': cluster %q node %q CA file %q", id.Cluster, id.Node, id.caFile)
				}
			}
		})
	}
}

// TestNewIdentityEmpty: a part missing from the PEM is named, not taken
// for one that failed to read and skipped.
func TestNewIdentityEmpty(t *testing.T) {
	dir := writeTestCluster(t, "c", "host0")
	for _, tt := range []struct {
		clear func(p *IdentityPEM)
		want  string
	}{
		{func(p *IdentityPEM) { p.CA = nil }, "ca.crt: no PEM data"},
		{func(p *IdentityPEM) { p.Key = nil }, "host0.key: no PEM data"},
		{func(p *IdentityPEM) { p.Cert = []byte{} }, "host0.crt: no PEM data"},
	} {
		p := readPEM(t, dir, "host0")
		tt.clear(&p)
		if _, err := NewIdentity("host0", p); !errors.Is(err, ErrCert) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewIdentity: %v\nwant ErrCert containing %q", err, tt.want)
		}
	}
}

// TestIdentityPEMWithholdsKey: printed or logged, alone or inside a
// struct, an IdentityPEM shows no byte of its key.
func TestIdentityPEMWithholdsKey(t *testing.T) {
	p := readPEM(t, writeTestCluster(t, "c", "host0"), "host0")
	spec := struct {
		Node string
		ID   IdentityPEM
	}{"host0", p}
	var log bytes.Buffer
	slog.New(slog.NewJSONHandler(&log, nil)).Info("spec", "identity", p)
	slog.New(slog.NewTextHandler(&log, nil)).Info("spec", "identity", p, "spec", spec)
	var out strings.Builder
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		fmt.Fprintf(&out, verb+"\n"+verb+"\n", p, spec)
	}
	out.Write(log.Bytes())
	key := strings.TrimSpace(string(p.Key))
	body := strings.Split(key, "\n")[1] // the first line of base64
	for _, secret := range []string{"PRIVATE KEY", body, base64.StdEncoding.EncodeToString(p.Key)[:40], fmt.Sprintf("%x", p.Key[:20])} {
		if strings.Contains(out.String(), secret) {
			t.Fatalf("output holds the key (%q):\n%s", secret, out.String())
		}
	}
	if !strings.Contains(out.String(), "Key: withheld") || !strings.Contains(log.String(), `"key":"withheld"`) {
		t.Errorf("output does not say the key is withheld:\n%s", out.String())
	}
}

// TestIdentityWithholdsKey: an Identity printed or logged whole (a
// test's failure, a debug line) shows no byte of its private key. It
// keeps the PEM in an unexported field, which fmt prints byte by byte
// without asking its Format; and with a verb other than %v fmt printed
// the tls.Certificate's key in full (D, the secret scalar), as a JSON
// log did.
func TestIdentityWithholdsKey(t *testing.T) {
	id, err := LoadIdentity(writeTestCluster(t, "c", "host0"), "host0")
	if err != nil {
		t.Fatal(err)
	}
	key := id.PEM().Key
	var out strings.Builder
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x"} {
		fmt.Fprintf(&out, verb+"\n"+verb+"\n", id, *id)
	}
	var log bytes.Buffer
	slog.New(slog.NewTextHandler(&log, nil)).Info("identity", "id", id)
	slog.New(slog.NewJSONHandler(&log, nil)).Info("identity", "id", id, "value", *id)
	out.Write(log.Bytes())
	dec := strings.Trim(fmt.Sprint(key[:16]), "[]")
	hex := strings.Trim(fmt.Sprintf("%#v", key[:16]), "[]uint8{}")
	raw, err := id.Cert.PrivateKey.(*ecdsa.PrivateKey).Bytes() // the secret scalar, D
	if err != nil {
		t.Fatal(err)
	}
	d := new(big.Int).SetBytes(raw)
	for _, secret := range []string{"PRIVATE KEY", dec, hex, fmt.Sprintf("%x", key[:16]), d.String(), d.Text(16)} {
		if strings.Contains(out.String(), secret) {
			t.Fatalf("a printed Identity holds the key (%q)", secret)
		}
	}
	if !strings.Contains(out.String(), `node "host0"`) {
		t.Errorf("a printed Identity does not name its node:\n%s", out.String())
	}
	if p := id.PEM(); !bytes.Equal(p.Key, key) || len(p.Cert) == 0 || len(p.CA) == 0 {
		t.Fatal("PEM no longer gives the identity's PEM")
	}
}
