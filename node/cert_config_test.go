package node

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"graphnode/mesh"
)

// TestLoadIdentityConfigOrNot: a certificate problem that lasts until an
// operator changes the files is a configuration error (node run exits
// 78, which the unit does not restart); one that time mends, a
// certificate not valid yet on a host whose clock is behind (booted
// before NTP set it), is not: the unit restarts the node until its
// clock is right. All of them exited 78 for a while, and a host up
// before NTP stayed down.
func TestLoadIdentityConfigOrNot(t *testing.T) {
	for _, tc := range []struct {
		name       string
		spec       mesh.ClusterSpec
		edit       func(dir string) error
		config     bool
		wantInText string
	}{
		{"not valid yet", mesh.ClusterSpec{NotBefore: time.Now().Add(10 * time.Minute)}, nil, false, "is this host's clock behind?"},
		{"expired", mesh.ClusterSpec{NotBefore: time.Now().Add(-48 * time.Hour), Validity: 24 * time.Hour}, nil, true, "expired at"},
		{"key readable by others", mesh.ClusterSpec{}, func(dir string) error { return os.Chmod(filepath.Join(dir, "host0.key"), 0o644) }, true, "must not be readable"},
		{"no certificate", mesh.ClusterSpec{}, func(dir string) error { return os.Remove(filepath.Join(dir, "host0.crt")) }, true, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.spec.Cluster, tc.spec.Nodes = "c1", []string{"host0"}
			if err := mesh.WriteCluster(dir, tc.spec); err != nil {
				t.Fatal(err)
			}
			if tc.edit != nil {
				if err := tc.edit(dir); err != nil {
					t.Fatal(err)
				}
			}
			cfg := DefaultConfig()
			cfg.Mesh.Certs, cfg.Node.Name, cfg.Mesh.Cluster = dir, "host0", "c1"
			_, err := loadIdentity(&cfg)
			if err == nil || !strings.Contains(err.Error(), tc.wantInText) || !strings.HasPrefix(err.Error(), "node: mesh.certs: mesh: ") {
				t.Fatalf("err = %v, want one naming %q", err, tc.wantInText)
			}
			if got := errors.Is(err, ErrConfig); got != tc.config {
				t.Errorf("errors.Is(%v, ErrConfig) = %t, want %t", err, got, tc.config)
			}
			if got := errors.Is(err, ErrTransient); got == tc.config {
				t.Errorf("errors.Is(%v, ErrTransient) = %t, want %t", err, got, !tc.config)
			}
			if !errors.Is(err, mesh.ErrCert) {
				t.Errorf("%v does not wrap mesh.ErrCert", err)
			}
		})
	}
}
