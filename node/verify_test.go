package node

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"graphnode/csr"
	"graphnode/partition"
)

// TestNodeVerify: a flipped byte inside a section of the part file (its
// features) passes the structural checks of New, which serves it; with
// node.verify = true New reads the whole file, checks every section's
// CRC-32C and refuses it, naming the file and the section.
func TestNodeVerify(t *testing.T) {
	dir := t.TempDir()
	parts := filepath.Join(dir, "parts")
	if err := writeSBMPart(parts, partition.SBMConfig{Nodes: 300, Blocks: 2, AvgDegree: 6, FeatDim: 4, Seed: 1, TrainFrac: 0.5, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	path := PartPath(parts, 0)
	cg, err := csr.Open(path, csr.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var off int64 = -1
	for _, s := range cg.Sections() {
		if s.Name == csr.SecFeat {
			off = int64(s.Offset) + int64(s.Length)/2
		}
	}
	cg.Close()
	if off < 0 {
		t.Fatal("no feat section")
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	f.Close()

	text := "version = 1\n[node]\nparts = " + quote(parts) + "%s\n[control]\nsocket = " + quote(filepath.Join(dir, "node.sock")) +
		"\n[rings]\ndir = " + quote(dir) + "\n"
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, verify := range []bool{false, true} {
		extra := ""
		if verify {
			extra = "\nverify = true"
		}
		cfg, err := LoadConfig(writeConfig(t, dir, strings.Replace(text, "%s", extra, 1)))
		if err != nil {
			t.Fatal(err)
		}
		n, err := New(cfg, log)
		switch {
		case !verify && err != nil:
			t.Errorf("verify = false: %v (the structure is intact: the node starts)", err)
		case verify && (err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `"feat"`)):
			t.Errorf("verify = true: err = %v, want the file and section \"feat\" named", err)
		}
		if n != nil {
			n.Close()
		}
	}
}
