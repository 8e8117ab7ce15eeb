package partition

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"graphnode/csr"
)

// writtenDir partitions a small graph into 3 parts and returns the dir.
func writtenDir(t *testing.T) (string, *Manifest) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "parts")
	m := partitionTo(t, testGraph(90, 400, true, false), dir, csr.In, 3, WriteOptions{Seed: 1})
	return dir, m
}

// problemsOf splits a joined error into its problems.
func problemsOf(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func TestManifestProblems(t *testing.T) {
	_, good := writtenDir(t)
	if err := good.Validate(); err != nil {
		t.Fatalf("fresh manifest: %v", err)
	}
	tests := []struct {
		key    string
		mutate func(m *Manifest)
		keep   bool // keep the stale checksum
	}{
		{"version", func(m *Manifest) { m.Version = 2 }, false},
		{"direction", func(m *Manifest) { m.Direction = "up" }, false},
		{"id_kind", func(m *Manifest) { m.IDKind = "uuid" }, false},
		{"feat_dtype", func(m *Manifest) { m.FeatDtype = "f64" }, false},
		{"class_names", func(m *Manifest) { m.ClassNames = m.ClassNames[:2] }, false},
		{"stats.frobs", func(m *Manifest) { m.Stats["frobs"] = 1 }, false},
		{"part", func(m *Manifest) { m.Parts = 4 }, false},
		{"part[1].index", func(m *Manifest) { m.Part[1].Index = 7 }, false},
		{"part[2].start", func(m *Manifest) { m.Part[2].Start++ }, false},
		{"part[2].end", func(m *Manifest) { m.Part[2].End-- }, false},
		{"edges", func(m *Manifest) { m.Part[0].Edges++ }, false},
		{"train", func(m *Manifest) { m.Part[0].Train-- }, false},
		{"part[1].max_degree", func(m *Manifest) { m.Part[1].MaxDegree = m.Part[1].Edges + 1 }, false},
		{"name", func(m *Manifest) { m.Name = "t\xe9st" }, false},
		{"class_names[1]", func(m *Manifest) { m.ClassNames = []string{"a", "b\xe9", "c", "d"} }, false},
		{"checksum", func(m *Manifest) { m.Name = "renamed" }, true},
	}
	for _, tt := range tests {
		m := *good
		m.Part = slices.Clone(good.Part)
		m.Stats = map[string]int64{}
		for k, v := range good.Stats {
			m.Stats[k] = v
		}
		tt.mutate(&m)
		if !tt.keep {
			m.SetChecksum()
		}
		probs := problemsOf(m.Validate())
		if len(probs) != 1 || !strings.Contains(probs[0].Error(), `graph.toml: key "`+tt.key+`"`) || !errors.Is(probs[0], ErrManifest) {
			t.Errorf("%s: problems %v, want one naming the key", tt.key, probs)
		}
	}

	// All at once.
	m := *good
	m.Part = slices.Clone(good.Part)
	m.Version, m.Direction, m.Part[1].Index = 0, "", 9
	probs := problemsOf(m.Validate())
	var keys []string
	for _, p := range probs {
		keys = append(keys, p.Error())
	}
	all := strings.Join(keys, "\n")
	for _, k := range []string{`key "version"`, `key "direction"`, `key "part[1].index"`, `key "checksum"`} {
		if !strings.Contains(all, k) {
			t.Errorf("joined problems lack %s:\n%s", k, all)
		}
	}
	if len(probs) != 4 {
		t.Errorf("%d problems, want 4:\n%s", len(probs), all)
	}
}

func TestOpenDirRefusesUnknownKey(t *testing.T) {
	dir, _ := writtenDir(t)
	path := filepath.Join(dir, ManifestFile)
	b, _ := os.ReadFile(path)
	os.WriteFile(path, append([]byte("bogus = 1\n"), b...), 0o644)
	_, err := OpenDir(dir)
	if err == nil || !strings.Contains(err.Error(), `graph.toml: key "bogus": unknown key`) {
		t.Errorf("err = %v", err)
	}
}

func TestOpenDirFileProblems(t *testing.T) {
	dir, m := writtenDir(t)
	if got, err := OpenDir(dir); err != nil || got.Checksum != m.Checksum {
		t.Fatalf("OpenDir of a fresh dir: %v", err)
	}
	os.Truncate(filepath.Join(dir, OrigIDsFile), 16)
	os.Remove(filepath.Join(dir, PartFile(2)))
	os.WriteFile(filepath.Join(dir, NamesFile), []byte("x"), 0o644)
	_, err := OpenDir(dir)
	probs := problemsOf(err)
	all := err.Error()
	// Each problem names the file on disk first, as csr.Open does, and
	// says what is wrong with it: the file is what the user repairs,
	// graph.toml is right.
	for _, want := range []string{
		filepath.Join(dir, OrigIDsFile) + `: 16 bytes on disk, graph.toml key "file[1].size" records 720 (truncated, or replaced by another file): corrupt file`,
		filepath.Join(dir, PartFile(2)) + `: missing (graph.toml key "file[4].path" lists it): `,
		filepath.Join(dir, NamesFile) + `: 1 bytes on disk, graph.toml key "file[0].size" records `,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
	if len(probs) != 3 {
		t.Errorf("%d problems, want 3:\n%s", len(probs), all)
	}
	for _, p := range probs {
		if strings.Contains(p.Error(), "invalid manifest") || strings.Contains(p.Error(), ManifestFile+": key") {
			t.Errorf("%v: blames graph.toml for a file on disk", p)
		}
	}
	if !errors.Is(err, csr.ErrCorrupt) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%v: want csr.ErrCorrupt (sizes) and fs.ErrNotExist (the missing file) wrapped", err)
	}
}

// hostCopy copies graph.toml of dir and the given files of it into a new
// directory: what one host of a cluster holds.
func hostCopy(t *testing.T, dir string, files ...string) string {
	t.Helper()
	host := t.TempDir()
	for _, f := range append([]string{ManifestFile}, files...) {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(host, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(host, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return host
}

// TestOpenPart: a host's copy of graph.toml and its own part file opens
// with OpenPart for that part (same checksum), not for another part nor
// with OpenDir, each naming the missing file; a part file of the wrong
// size is refused.
func TestOpenPart(t *testing.T) {
	dir, m := writtenDir(t)
	host := hostCopy(t, dir, PartFile(1))
	if got, err := OpenPart(host, 1); err != nil || got.Checksum != m.Checksum {
		t.Fatalf("OpenPart(1) of graph.toml and part 1: %v", err)
	}
	if _, err := OpenPart(host, 0); err == nil || !strings.Contains(err.Error(), "part-0/part.csr: missing") || strings.Contains(err.Error(), "orig_ids") {
		t.Fatalf("OpenPart(0) without part 0: %v, want part-0/part.csr named alone", err)
	}
	if _, err := OpenDir(host); err == nil || !strings.Contains(err.Error(), "orig_ids.bin") {
		t.Fatalf("OpenDir of one host's files: %v, want the missing files named", err)
	}
	os.Truncate(filepath.Join(host, PartFile(1)), 100)
	if _, err := OpenPart(host, 1); err == nil || !strings.Contains(err.Error(), "part-1/part.csr: 100 bytes on disk") {
		t.Fatalf("OpenPart(1) of a truncated part: %v", err)
	}
}

// TestOpenManifest: graph.toml alone, copied away from its files, opens
// with OpenManifest (same checksum) and not with OpenDir; its content is
// still checked.
func TestOpenManifest(t *testing.T) {
	dir, m := writtenDir(t)
	alone := t.TempDir()
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(alone, ManifestFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := OpenManifest(alone); err != nil || got.Checksum != m.Checksum {
		t.Fatalf("OpenManifest of graph.toml alone: %v", err)
	}
	if _, err := OpenDir(alone); err == nil || !strings.Contains(err.Error(), "part-0/part.csr: missing") {
		t.Fatalf("OpenDir of graph.toml alone: %v, want its missing files", err)
	}
	os.WriteFile(filepath.Join(alone, ManifestFile), append([]byte("bogus = 1\n"), b...), 0o644)
	if _, err := OpenManifest(alone); err == nil || !strings.Contains(err.Error(), `key "bogus": unknown key`) {
		t.Fatalf("OpenManifest of a bad graph.toml: %v", err)
	}
	// ParseManifest checks bytes that are not on disk the same way.
	if got, err := ParseManifest(b, "from host0"); err != nil || got.Checksum != m.Checksum {
		t.Fatalf("ParseManifest: %v", err)
	}
	edited := strings.Replace(string(b), "seed = 1\n", "seed = 2\n", 1)
	if _, err := ParseManifest([]byte(edited), "from host0"); err == nil || !strings.Contains(err.Error(), `from host0: key "checksum"`) {
		t.Fatalf("ParseManifest of an edited graph.toml: %v, want its checksum named", err)
	}
}

func TestManifestBookAndChecksum(t *testing.T) {
	_, m := writtenDir(t)
	b, err := m.Book()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b.Bounds, []uint64{0, 30, 60, 90}) {
		t.Errorf("bounds %v, want [0 30 60 90]", b.Bounds)
	}
	sum := m.Checksum
	m.SetChecksum()
	if m.Checksum != sum || len(sum) != 32 {
		t.Errorf("checksum %q then %q", sum, m.Checksum)
	}
	m.File[0].CRC32C = "00000000"
	m.SetChecksum()
	if m.Checksum == sum {
		t.Error("checksum ignores the file CRCs")
	}
}

// sampleManifest is a valid manifest built in memory.
func sampleManifest() *Manifest {
	m := &Manifest{
		Version: ManifestVersion, Name: "g", Nodes: 10, Edges: 30, Parts: 2, Method: MethodRandom, Seed: 3,
		Direction: "in", SelfLoops: "keep", Duplicates: "drop", Split: "keep", IDKind: "int",
		FeatDim: 4, FeatDtype: "f32", LabelDim: 1, Classes: 2, ClassNames: []string{"x", "y"},
		Train: 3, Val: 1, Test: 1, Stats: StatsMap(Stats{EdgesRead: 31, Duplicates: 1}),
		Part: []PartEntry{{Index: 0, Start: 0, End: 5, Edges: 14, Train: 2, Val: 1, EdgeCut: 7},
			{Index: 1, Start: 5, End: 10, Edges: 16, Train: 1, Test: 1, EdgeCut: 8}},
		File: []FileEntry{{Path: OrigIDsFile, Size: 80, CRC32C: "0a0b0c0d"}},
	}
	m.SetChecksum()
	return m
}

func FuzzManifestDecode(f *testing.F) {
	var buf strings.Builder
	if err := sampleManifest().Encode(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.String())
	f.Add("version = 1\nparts = 1\n[[part]]\nindex = 0\n")
	f.Fuzz(func(t *testing.T, s string) {
		// The decoder a node runs on graph.toml (and on one a peer sends):
		// unknown keys refused, every key checked. Fuzzing toml.Decode
		// and Validate left out the refusal and the checks of the files.
		m, err := ParseManifest([]byte(s), ManifestFile)
		if err != nil {
			return
		}
		var out strings.Builder
		if err := m.Encode(&out); err != nil {
			t.Fatalf("an accepted manifest does not encode: %v", err)
		}
		back, err := ParseManifest([]byte(out.String()), ManifestFile)
		if err != nil {
			t.Fatalf("an accepted manifest, encoded, is refused: %v\n%s", err, out.String())
		}
		if !reflect.DeepEqual(back, m) {
			t.Fatalf("round trip changed the manifest:\n%+v\n%+v", m, back)
		}
	})
}

// A parts count that disagrees with the [[part]] entries is one problem,
// under "part": not a "not listed" for every part file it would imply
// (parts = 4000000000 listed, and allocated, four billion of them).
func TestParseManifestPartsMismatch(t *testing.T) {
	m := sampleManifest()
	m.Parts = 100000
	m.SetChecksum()
	var buf strings.Builder
	if err := m.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	_, err := ParseManifest([]byte(buf.String()), ManifestFile)
	probs := problemsOf(err)
	var msgs []string
	for _, p := range probs[:min(len(probs), 5)] {
		msgs = append(msgs, p.Error())
	}
	// sampleManifest lists orig_ids.bin alone: its two part files are
	// not listed.
	want := []string{
		`graph.toml: key "part": has 2 entries for parts = 100000`,
		`key "file": part-0/part.csr is not listed`,
		`key "file": part-1/part.csr is not listed`,
	}
	if len(probs) != len(want) {
		t.Fatalf("%d problems, want %d:\n%s", len(probs), len(want), strings.Join(msgs, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(msgs[i], w) {
			t.Errorf("problem %d = %s, want %s", i, msgs[i], w)
		}
	}
}

// A file of graph.toml is a path inside the directory: node fetch writes
// what a peer's graph.toml lists under its own directory, so "..", "."
// and paths leading out are refused, naming the entry.
func TestManifestFilePaths(t *testing.T) {
	for _, tt := range []struct {
		path string
		ok   bool
	}{
		{"part-0/part.csr", true},
		{"..x", true},
		{"", false},
		{"/etc/passwd", false},
		{"../x", false},
		{"a/../b", false},
		{"a/", false},
		{ManifestFile, false},
		{"..", false},
		{".", false},
	} {
		m := sampleManifest()
		m.File = append(m.File, FileEntry{Path: tt.path, Size: 1, CRC32C: "0a0b0c0d"})
		m.SetChecksum()
		var buf strings.Builder
		if err := m.Encode(&buf); err != nil {
			t.Fatal(err)
		}
		_, err := ParseManifest([]byte(buf.String()), ManifestFile)
		refused := err != nil && strings.Contains(err.Error(), `key "file[1].path": "`+tt.path+`" is not a file inside the directory`)
		if refused == tt.ok {
			t.Errorf("path %q: %v, want refused %v", tt.path, err, !tt.ok)
		}
	}
}

// TestNumbering: two partitionings of one graph into the same ranges
// number its nodes otherwise, and their Numbering differs; the same
// partitioning written twice has the same.
func TestNumbering(t *testing.T) {
	g := testGraph(60, 200, false, false)
	write := func(assign []uint32) *Manifest {
		adj, err := BuildAdj(context.Background(), g, csr.In, CleanOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Write(context.Background(), filepath.Join(t.TempDir(), "parts"), g, adj, assign, WriteOptions{Parts: 2, Method: "given"})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a, b := make([]uint32, 60), make([]uint32, 60)
	for v := range a {
		a[v], b[v] = uint32(v%2), uint32(v/30) // 30 nodes a part both ways
	}
	ma, mb, ma2 := write(a), write(b), write(a)
	if ma.Part[0].End != mb.Part[0].End || ma.Numbering() == 0 || ma.Numbering() == mb.Numbering() || ma.Numbering() != ma2.Numbering() {
		t.Fatalf("ranges %v / %v, numbering %08x / %08x / %08x: want equal ranges, distinct nonzero numberings, the same again",
			ma.Part[0].End, mb.Part[0].End, ma.Numbering(), mb.Numbering(), ma2.Numbering())
	}
	if (&Manifest{}).Numbering() != 0 {
		t.Fatal("a manifest without orig_ids.bin has a numbering")
	}
}

// TestNumberingNames: with string ids the nodes are names.txt's lines in
// the order orig_ids.bin gives, so two graphs of as many nodes
// partitioned alike (WN18 and WN18RR: 40943 entities each, their
// dictionaries in other orders) have the same orig_ids.bin and still
// number other nodes: Numbering covers names.txt too. LegacyNumbering is
// the tag builds before recorded, orig_ids.bin's alone, and 0 where
// Numbering is that (no names.txt).
func TestNumberingNames(t *testing.T) {
	with := func(names string) *Manifest {
		m := &Manifest{File: []FileEntry{{Path: OrigIDsFile, Size: 8, CRC32C: "0a0b0c0d"}}}
		if names != "" {
			m.File = append(m.File, FileEntry{Path: NamesFile, Size: 4, CRC32C: names})
		}
		return m
	}
	a, b, a2, plain := with("11111111"), with("22222222"), with("11111111"), with("")
	if a.Numbering() == 0 || a.Numbering() == b.Numbering() || a.Numbering() != a2.Numbering() || a.Numbering() == plain.Numbering() {
		t.Errorf("numbering with names 11111111 %08x, 22222222 %08x, 11111111 again %08x, none %08x: want distinct but for the same names",
			a.Numbering(), b.Numbering(), a2.Numbering(), plain.Numbering())
	}
	if a.LegacyNumbering() != 0x0a0b0c0d || b.LegacyNumbering() != 0x0a0b0c0d {
		t.Errorf("legacy numbering %08x, %08x: want orig_ids.bin's CRC 0a0b0c0d", a.LegacyNumbering(), b.LegacyNumbering())
	}
	if plain.Numbering() != 0x0a0b0c0d || plain.LegacyNumbering() != 0 {
		t.Errorf("without names.txt: numbering %08x, legacy %08x: want 0a0b0c0d and 0", plain.Numbering(), plain.LegacyNumbering())
	}
}

// TestManifestCutName: a knowledge graph's cut is named for the entity
// a triple is not stored with: with direction in it is stored with its
// tail, and "tail owned elsewhere" named the wrong one.
func TestManifestCutName(t *testing.T) {
	for _, tt := range []struct {
		relations int
		direction string
		want      string
	}{
		{0, "in", "edge cut"},
		{0, "out", "edge cut"},
		{3, "out", "triple cut (tail owned elsewhere)"},
		{3, "in", "triple cut (head owned elsewhere)"},
	} {
		m := &Manifest{Relations: tt.relations, Direction: tt.direction}
		if got := m.CutName(); got != tt.want {
			t.Errorf("relations %d, direction %s: %q, want %q", tt.relations, tt.direction, got, tt.want)
		}
	}
}
