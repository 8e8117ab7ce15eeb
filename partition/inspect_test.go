package partition

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"graphnode/csr"
)

func TestInspect(t *testing.T) {
	dir, m := writtenDir(t)
	r, err := Inspect(context.Background(), dir, InspectOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() || len(r.Files) != len(m.File) {
		t.Fatalf("OK %v, %d file checks for %d files", r.OK(), len(r.Files), len(m.File))
	}
	var edges, cut, train uint64
	for p, pr := range r.Parts {
		if pr.Nodes != 30 || pr.Edges != m.Part[p].Edges || pr.Cut != m.Part[p].EdgeCut || pr.Train != m.Part[p].Train {
			t.Errorf("part %d: %+v, manifest %+v", p, pr, m.Part[p])
		}
		if pr.FeatBytes != 30*3*4 || pr.DegMin > pr.DegP50 || pr.DegP50 > pr.DegP99 || pr.DegP99 > pr.DegMax {
			t.Errorf("part %d: feat bytes %d, degrees %d/%d/%d/%d", p, pr.FeatBytes, pr.DegMin, pr.DegP50, pr.DegP99, pr.DegMax)
		}
		edges += pr.Edges
		cut += pr.Cut
		train += pr.Train
	}
	if r.Edges != m.Edges || edges != m.Edges || r.Cut != cut || train != m.Train || r.NodeBalance != 1 {
		t.Errorf("totals: edges %d cut %d node balance %v", r.Edges, r.Cut, r.NodeBalance)
	}
	// A random 3-way assignment cuts about 2/3 of the edges.
	if f := float64(r.Cut) / float64(r.Edges); f < 0.5 || f > 0.8 {
		t.Errorf("edge cut %.2f, want about 0.67", f)
	}
	var out strings.Builder
	if err := r.Format(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"90 nodes", "part  nodes  edges", "balance max/mean: nodes 1.000", "part-2/part.csr", "  section  type", "indices  u64", "verify", "orig_ids.bin     OK"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestInspectVerifyCorruption(t *testing.T) {
	dir, _ := writtenDir(t)
	path := filepath.Join(dir, PartFile(1))
	g, err := csr.Open(path, csr.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var off uint64
	for _, s := range g.Sections() {
		if s.Name == csr.SecFeat {
			off = s.Offset + s.Length/2
		}
	}
	g.Close()
	b, _ := os.ReadFile(path)
	b[off] ^= 0x40
	os.WriteFile(path, b, 0o644)

	r, err := Inspect(context.Background(), dir, InspectOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.OK() {
		t.Fatal("corrupt part file verified OK")
	}
	var out strings.Builder
	r.Format(&out)
	for _, want := range []string{"part-1/part.csr  FAILED", `section "feat"`, "part-0/part.csr  OK"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	// Without --verify the flipped feature byte goes unnoticed.
	if r, err := Inspect(context.Background(), dir, InspectOptions{}); err != nil || !r.OK() {
		t.Errorf("without verify: %v", err)
	}
}
