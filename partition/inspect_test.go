package partition

import (
	"context"
	"errors"
	"fmt"
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

// TestInspectTrainBalance: the balance line's train is "-" for a graph
// without training nodes, as node partition prints it; it was 0.000.
func TestInspectTrainBalance(t *testing.T) {
	for _, tt := range []struct {
		name  string
		train []uint32
		want  string
	}{
		{"none", nil, "balance max/mean: nodes 1.000, edges 1.000, train -\n"},
		{"two", []uint32{0, 1}, "balance max/mean: nodes 1.000, edges 1.000, train 1.000\n"}, // one in each part (seed 0)
	} {
		t.Run(tt.name, func(t *testing.T) {
			// A 4-cycle into 2 parts: 2 nodes and 2 edges each.
			g := &Graph{Name: "cycle", NumNodes: 4, Src: []uint32{0, 1, 2, 3}, Dst: []uint32{1, 2, 3, 0}, Train: tt.train}
			dir := filepath.Join(t.TempDir(), "parts")
			partitionTo(t, g, dir, csr.In, 2, WriteOptions{})
			r, err := Inspect(context.Background(), dir, InspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			if err := r.Format(&out); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("report lacks %q:\n%s", tt.want, out.String())
			}
		})
	}
}

// TestInspectUnlisted: --verify names what the directory holds besides
// graph.toml and its files (a part of another partitioning, a fetch cut
// off, a file of the user's), each directory once, and fails on none of
// it; a listed directory reached through a link is no stray, and a
// directory reached through a link is walked.
func TestInspectUnlisted(t *testing.T) {
	dir, m := writtenDir(t)
	r, err := Inspect(context.Background(), dir, InspectOptions{Verify: true})
	if err != nil || r.Unlisted != nil {
		t.Fatalf("as written: unlisted %q, %v", r.Unlisted, err)
	}
	for _, f := range []string{"part-3/part.csr", "part-3/ids/x", "notes.txt", "part-1/part.csr.fetch"} {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// part-0 moved elsewhere and linked back, as a host with two disks may hold it.
	elsewhere := filepath.Join(t.TempDir(), "part-0")
	if err := os.Rename(filepath.Join(dir, "part-0"), elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, "part-0")); err != nil {
		t.Fatal(err)
	}
	r, err = Inspect(context.Background(), dir, InspectOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"notes.txt", "part-1/part.csr.fetch", "part-3/"}
	if !r.OK() || len(r.Files) != len(m.File) || strings.Join(r.Unlisted, " ") != strings.Join(want, " ") {
		t.Errorf("OK %v, %d files checked, unlisted %q; want OK, %d, %q", r.OK(), len(r.Files), r.Unlisted, len(m.File), want)
	}
	var out strings.Builder
	r.Format(&out)
	if line := "not in graph.toml, not checked: notes.txt, part-1/part.csr.fetch, part-3/\n"; !strings.Contains(out.String(), line) {
		t.Errorf("report lacks %q:\n%s", line, out.String())
	}
	// Many are counted past the first unlistedShown.
	many := &Report{Manifest: r.Manifest, Files: r.Files, Parts: r.Parts}
	for i := range unlistedShown + 3 {
		many.Unlisted = append(many.Unlisted, fmt.Sprintf("x%02d", i))
	}
	out.Reset()
	many.Format(&out)
	if line := ", x19 and 3 more\n"; !strings.Contains(out.String(), line) || strings.Contains(out.String(), "x20") {
		t.Errorf("report of %d unlisted lacks %q or names x20:\n%s", len(many.Unlisted), line, out.String())
	}
	// The directory reached through a link is walked all the same.
	link := filepath.Join(t.TempDir(), "parts")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if r, err := Inspect(context.Background(), link, InspectOptions{Verify: true}); err != nil || strings.Join(r.Unlisted, " ") != strings.Join(want, " ") {
		t.Errorf("through a link: unlisted %q, %v", r.Unlisted, err)
	}
	// Without --verify the directory is not listed.
	if r, err := Inspect(context.Background(), dir, InspectOptions{}); err != nil || r.Unlisted != nil {
		t.Errorf("without verify: unlisted %q, %v", r.Unlisted, err)
	}
	// One host's copy: the same, around part 1 alone.
	one := 1
	if r, err := Inspect(context.Background(), dir, InspectOptions{Verify: true, Part: &one}); err != nil || strings.Join(r.Unlisted, " ") != strings.Join(want, " ") {
		t.Errorf("part 1 alone: unlisted %q, %v", r.Unlisted, err)
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

// TestInspectVerifyReadShares: graph.toml's expected read shares of a
// part disagree with those recomputed from the files (the manifest edited
// and re-checksummed, as a build with another estimate writes it). The
// checksum says they are what the build that wrote the files estimated:
// verification passes, and the report gives both, graph.toml's on a line
// of the part's own. It failed the part's file, so every change of the
// estimate failed every directory written before it (a Cora partitioning
// at batch 64, when the last batch came to be estimated at its own size).
func TestInspectVerifyReadShares(t *testing.T) {
	dir, m, _, _, _ := cacheDir(t, MethodFreq, CacheOptions{Ratio: 0.2})
	m.Part[0].ReadsLocal -= 0.1
	m.Part[0].ReadsRemote += 0.1
	rewriteManifest(t, dir, m)
	r, err := Inspect(context.Background(), dir, InspectOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		var out strings.Builder
		r.Format(&out)
		t.Fatalf("another estimate's shares failed verification:\n%s", out.String())
	}
	e := m.Part[0]
	if got := r.Parts[0].Recorded; got == nil || got.Local != e.ReadsLocal || got.Cached != e.ReadsCached || got.Remote != e.ReadsRemote {
		t.Errorf("part 0 recorded shares %+v, want graph.toml's %g / %g / %g", got, e.ReadsLocal, e.ReadsCached, e.ReadsRemote)
	}
	if got := r.Parts[1].Recorded; got != nil {
		t.Errorf("part 1, whose shares agree, has recorded shares %+v", got)
	}
	var out strings.Builder
	r.Format(&out)
	want := fmt.Sprintf("part 0: graph.toml records expected reads local %.2f%%, cached %.2f%%, remote %.2f%%: the estimate of the build that wrote it",
		100*e.ReadsLocal, 100*e.ReadsCached, 100*e.ReadsRemote)
	if !strings.Contains(out.String(), want) || strings.Contains(out.String(), "part 1: graph.toml records") {
		t.Errorf("report lacks %q, or names part 1:\n%s", want, out.String())
	}
	// Without --verify nothing is compared.
	if r, err := Inspect(context.Background(), dir, InspectOptions{}); err != nil || r.Parts[0].Recorded != nil {
		t.Errorf("without verify: %v, recorded %+v", err, r.Parts[0].Recorded)
	}
}

// TestInspectVerifyMaxDegree: a part's max_degree in graph.toml that is
// not its file's largest degree fails that part; one left out (a
// graph.toml written before it was recorded) is no failure, and the set
// then has no MaxDegree.
func TestInspectVerifyMaxDegree(t *testing.T) {
	dir, m := writtenDir(t)
	m.Part[1].MaxDegree--
	rewriteManifest(t, dir, m)
	r, err := Inspect(context.Background(), dir, InspectOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	r.Format(&out)
	if want := `graph.toml key "part[1].max_degree" says`; r.OK() || !strings.Contains(out.String(), want) {
		t.Errorf("OK %v, report lacks %q:\n%s", r.OK(), want, out.String())
	}
	m.Part[1].MaxDegree = 0
	rewriteManifest(t, dir, m)
	if r, err := Inspect(context.Background(), dir, InspectOptions{Verify: true}); err != nil || !r.OK() {
		t.Errorf("graph.toml without part 1's max_degree: OK %v, %v", r != nil && r.OK(), err)
	}
	if d, ok := m.MaxDegree(); ok {
		t.Errorf("MaxDegree() = %d, true with a part's left out", d)
	}
}

// rewriteManifest writes m, its checksum recomputed, as dir's graph.toml:
// an edit a checksum does not catch.
func rewriteManifest(t *testing.T, dir string, m *Manifest) {
	t.Helper()
	if err := m.SetChecksum(); err != nil {
		t.Fatal(err)
	}
	if _, err := writeFile(dir, ManifestFile, m.Encode); err != nil {
		t.Fatal(err)
	}
}

// TestInspectPart: one host's copy (graph.toml and part 1) inspects and
// verifies with Part = 1 (that part alone, its file alone, no balance
// line); the whole-directory inspection of the copy, or another part of
// it, or a part out of range, is an error naming what is missing; a
// flipped byte in the part fails its verification.
func TestInspectPart(t *testing.T) {
	dir, m := writtenDir(t)
	host := hostCopy(t, dir, PartFile(1))
	one := 1
	r, err := Inspect(context.Background(), host, InspectOptions{Verify: true, Part: &one})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() || !r.OnePart || len(r.Parts) != 1 || r.Parts[0].Part != 1 || r.Parts[0].Edges != m.Part[1].Edges ||
		len(r.Files) != 1 || r.Files[0].Path != PartFile(1) {
		t.Fatalf("report of part 1 alone: OK %v, parts %+v, files %+v", r.OK(), r.Parts, r.Files)
	}
	var out strings.Builder
	if err := r.Format(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"part 1 alone", "part-1/part.csr  OK"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "balance") || strings.Contains(out.String(), "part-0") {
		t.Errorf("report of part 1 alone speaks of the others:\n%s", out.String())
	}
	if _, err := Inspect(context.Background(), host, InspectOptions{}); err == nil || !strings.Contains(err.Error(), "part-0/part.csr") {
		t.Errorf("whole inspection of one host's copy: %v", err)
	}
	zero, five := 0, 5
	if _, err := Inspect(context.Background(), host, InspectOptions{Part: &zero}); err == nil || !strings.Contains(err.Error(), "part-0/part.csr") {
		t.Errorf("part 0 of a copy holding part 1: %v", err)
	}
	if _, err := Inspect(context.Background(), host, InspectOptions{Part: &five}); err == nil || !strings.Contains(err.Error(), "holds parts 0..2") {
		t.Errorf("part 5 of 3: %v", err)
	}
	path := filepath.Join(host, PartFile(1))
	b, _ := os.ReadFile(path)
	b[len(b)-1] ^= 0x01
	os.WriteFile(path, b, 0o644)
	if r, err := Inspect(context.Background(), host, InspectOptions{Verify: true, Part: &one}); err != nil || r.OK() {
		t.Errorf("flipped byte in part 1: %v, OK %v", err, r != nil && r.OK())
	}
}

// TestInspectTotalsWithUnreadablePart: a part file that does not open
// is left out of the whole-directory line rather than counted as empty:
// a partitioning balanced within 1.007 showed "nodes 1.340, edges
// 1.729" with one of four parts corrupt.
func TestInspectTotalsWithUnreadablePart(t *testing.T) {
	dir, _ := writtenDir(t)
	path := filepath.Join(dir, PartFile(1))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[100] ^= 0x40 // in the header, which then fails its checksum
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, verify := range []bool{false, true} {
		r, err := Inspect(context.Background(), dir, InspectOptions{Verify: verify})
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		r.Format(&out)
		if s := out.String(); r.OK() || strings.Contains(s, "balance max/mean") || !strings.Contains(s, "edge cut and balance not computed: part 1 could not be read") {
			t.Errorf("verify %v: OK %v, report:\n%s", verify, r.OK(), s)
		}
	}
}

// TestInspectPartFileChanged: a part file truncated or rewritten in place
// after Inspect opened it (a copy into the directory under way) is an
// error naming the file, from the part's measures and from the read
// estimate over every part. Both read the mapping outside csr.Graph.Read,
// and the read past the file's new end ended node inspect with SIGBUS
// ("fatal error: fault" and every goroutine's stack, exit 2).
//
// The graph has no splits: a mask read (csr.Graph.Mask reads through
// csr.Graph.Read itself) would find the change before the reads at fault.
func TestInspectPartFileChanged(t *testing.T) {
	g := testGraph(600, 3000, false, false)
	g.Train, g.Val, g.Test = nil, nil, nil
	dir := filepath.Join(t.TempDir(), "parts")
	m := partitionTo(t, g, dir, csr.In, 3, WriteOptions{Seed: 1})
	heat := HeatOptions{Fanouts: []int{5, 3}, BatchSize: 16}
	graphs := make([]*csr.Graph, m.Parts)
	for p := range graphs {
		g, err := csr.Open(filepath.Join(dir, filepath.FromSlash(PartFile(p))), csr.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		graphs[p] = g
	}
	// Both read whole before the change.
	pr := PartReport{Part: 1, Path: PartFile(1)}
	measurePart(&pr, graphs[1], m, 1)
	if pr.Err != nil || pr.Edges != m.Part[1].Edges {
		t.Fatalf("part 1 before the change: %v, %d edges, want %d", pr.Err, pr.Edges, m.Part[1].Edges)
	}
	if _, err := partsReads(context.Background(), dir, m, graphs, heat); err != nil {
		t.Fatal(err)
	}
	changed := filepath.Join(dir, filepath.FromSlash(PartFile(1)))
	if err := os.Truncate(changed, 0); err != nil {
		t.Fatal(err)
	}
	pr = PartReport{Part: 1, Path: PartFile(1)}
	measurePart(&pr, graphs[1], m, 1)
	if !errors.Is(pr.Err, csr.ErrChanged) || !strings.Contains(pr.Err.Error(), changed) {
		t.Errorf("part 1 truncated: %v, want csr.ErrChanged naming %s", pr.Err, changed)
	}
	_, err := partsReads(context.Background(), dir, m, graphs, heat)
	if !errors.Is(err, csr.ErrChanged) || !strings.Contains(err.Error(), changed) {
		t.Errorf("read estimate with part 1 truncated: %v, want csr.ErrChanged naming %s", err, changed)
	}
}
