package partition

import (
	"cmp"
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"graphnode/csr"
)

func TestSelectCache(t *testing.T) {
	// 6 nodes, 2 parts; heat[v*2+p].
	heat := &Heat{Parts: 2, Val: []float32{
		5, 1, // 0
		0, 4, // 1
		3, 3, // 2
		2, 0, // 3
		3, 9, // 4
		1, 1, // 5
	}}
	owner := []uint32{0, 0, 0, 1, 1, 1}
	got, err := SelectCache(context.Background(), heat, owner, []uint64{2, 5})
	if err != nil {
		t.Fatal(err)
	}
	// Part 0 may cache 3, 4, 5 (heats 2, 3, 1): the top 2 are 4 and 3.
	// Part 1 may cache 0, 1, 2 (heats 1, 4, 3), all with heat > 0.
	if !slices.Equal(got[0], []uint32{3, 4}) || !slices.Equal(got[1], []uint32{0, 1, 2}) {
		t.Errorf("cache %v, want [[3 4] [0 1 2]]", got)
	}
	shares := EstimateShares(heat, owner, got)
	// Part 0 reads 14: local 5+0+3, cached 2+3, remote 1.
	want := ReadShares{Local: 8.0 / 14, Cached: 5.0 / 14, Remote: 1.0 / 14, Reads: 14}
	if s := shares[0]; math.Abs(s.Local-want.Local) > 1e-9 || math.Abs(s.Cached-want.Cached) > 1e-9 || math.Abs(s.Remote-want.Remote) > 1e-9 || s.Reads != 14 {
		t.Errorf("shares of part 0 %+v, want %+v", s, want)
	}
	// Ties go to the lower index.
	got, _ = SelectCache(context.Background(), &Heat{Parts: 2, Val: []float32{0, 1, 0, 1, 0, 1, 9, 0}}, []uint32{0, 0, 0, 1}, []uint64{0, 2})
	if !slices.Equal(got[1], []uint32{0, 1}) || got[0] != nil {
		t.Errorf("ties: %v, want [[] [0 1]]", got)
	}
}

func TestCacheOptions(t *testing.T) {
	for _, tt := range []struct {
		o    CacheOptions
		row  int
		want string
	}{
		{CacheOptions{Ratio: -1}, 4, "partition: cache ratio -1: want a number ≥ 0"},
		{CacheOptions{Ratio: 0.1, Bytes: 10}, 4, "partition: cache ratio 0.1 and cache bytes 10: give one of them"},
		{CacheOptions{Ratio: 0.1}, 0, "partition: cache: the graph has no features to cache (a cache holds feature rows: leave out --cache-ratio and --cache-bytes)"},
		{CacheOptions{Ratio: -1, Bytes: -2}, 4, "partition: cache ratio -1: want a number ≥ 0\npartition: cache bytes -2: want ≥ 0"},
	} {
		if err := tt.o.Validate(tt.row); err == nil || err.Error() != tt.want {
			t.Errorf("%+v: %v, want %q", tt.o, err, tt.want)
		}
	}
	if n := (CacheOptions{Ratio: 0.25}).Limit(10, 4); n != 2 {
		t.Errorf("ratio limit %d, want 2", n)
	}
	// A cached node costs its feature row and its 8-byte id in cache_ids.
	if n := (CacheOptions{Bytes: 100}).Limit(10, 12); n != 5 {
		t.Errorf("bytes limit %d, want 5", n)
	}
}

// cacheDir partitions the test graph into 3 parts with a cache.
func cacheDir(t *testing.T, method string, cache CacheOptions) (string, *Manifest, *Graph, *Heat, []uint32) {
	t.Helper()
	ctx := context.Background()
	g := testGraph(600, 3000, false, false)
	adj, err := BuildAdj(ctx, g, csr.In, CleanOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fanouts := []int{5, 3}
	assign, err := Assign(ctx, g, adj, AssignOptions{Method: method, Parts: 3, Seed: 2, Fanouts: fanouts, BatchSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "parts")
	m, err := Write(ctx, dir, g, adj, assign, WriteOptions{Parts: 3, Method: method, Seed: 2, Fanouts: fanouts, BatchSize: 16, Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	// Part p's trainer reads rank p's share of the training nodes in
	// new id order: by part, then old index.
	train := slices.Clone(g.Train)
	slices.SortFunc(train, func(a, b uint32) int { return cmp.Or(cmp.Compare(assign[a], assign[b]), cmp.Compare(a, b)) })
	heat, err := EstimateHeat(ctx, adj, TrainerSeeds(train, 3), HeatOptions{Fanouts: fanouts, BatchSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	return dir, m, g, heat, assign
}

func TestWriteCache(t *testing.T) {
	for _, method := range []string{MethodRandom, MethodMetis, MethodFreq} {
		dir, m, g, heat, assign := cacheDir(t, method, CacheOptions{Ratio: 0.2})
		raw, err := os.ReadFile(filepath.Join(dir, OrigIDsFile))
		if err != nil {
			t.Fatal(err)
		}
		oldOf := func(id uint64) uint32 { return uint32((binary.LittleEndian.Uint64(raw[8*id:]) - 1000) / 7) }
		for p := range 3 {
			pg, err := csr.Open(filepath.Join(dir, PartFile(p)), csr.OpenOptions{Verify: true})
			if err != nil {
				t.Fatal(err)
			}
			meta, ids, feat := pg.Meta(), pg.CacheIDs(), pg.CacheFeat()
			owned := meta.End - meta.Start
			if uint64(len(ids)) != uint64(0.2*float64(owned)) || uint64(len(ids)) != m.Part[p].Cache {
				t.Errorf("%s part %d: %d cached of %d owned (manifest %d), want ⌊0.2 × owned⌋", method, p, len(ids), owned, m.Part[p].Cache)
			}
			if !slices.IsSorted(ids) {
				t.Errorf("%s part %d: cache ids not sorted", method, p)
			}
			inCache := make(map[uint32]bool)
			for i, id := range ids {
				if id >= meta.Start && id < meta.End {
					t.Errorf("%s part %d: cached id %d is owned here", method, p, id)
				}
				old := oldOf(id)
				inCache[old] = true
				for j := range 3 {
					f := math.Float32frombits(binary.LittleEndian.Uint32(feat[(3*i+j)*4:]))
					if f != g.Feat[3*int(old)+j] {
						t.Fatalf("%s part %d: cache row %d (id %d) column %d is %g, want %g", method, p, i, id, j, f, g.Feat[3*int(old)+j])
					}
				}
			}
			// The cache is the hottest non-owned nodes.
			minIn, maxOut := float32(math.Inf(1)), float32(0)
			for v := range uint32(g.NumNodes) {
				if assign[v] == uint32(p) {
					continue
				}
				if inCache[v] {
					minIn = min(minIn, heat.At(v, p))
				} else {
					maxOut = max(maxOut, heat.At(v, p))
				}
			}
			if minIn < maxOut || minIn == 0 {
				t.Errorf("%s part %d: coldest cached heat %g, hottest uncached %g", method, p, minIn, maxOut)
			}
			pg.Close()
		}
		r, err := Inspect(context.Background(), dir, InspectOptions{Verify: true})
		if err != nil || !r.OK() {
			t.Fatalf("%s: inspect --verify: %v %+v", method, err, r)
		}
	}
}

func TestCacheShares(t *testing.T) {
	var prev float64
	for i, ratio := range []float64{0, 0.05, 0.2, 0.5} {
		dir, m, _, _, _ := cacheDir(t, MethodRandom, CacheOptions{Ratio: ratio})
		r, err := Inspect(context.Background(), dir, InspectOptions{Verify: true})
		if err != nil || !r.OK() {
			t.Fatalf("ratio %g: inspect: %v", ratio, err)
		}
		for p, pr := range r.Parts {
			s := pr.Reads
			if math.Abs(s.Local+s.Cached+s.Remote-1) > 1e-9 || s.Reads <= 0 {
				t.Errorf("ratio %g part %d: shares %+v do not add up to 1", ratio, p, s)
			}
			if math.Abs(s.Local-m.Part[p].ReadsLocal) > 1e-5 || math.Abs(s.Cached-m.Part[p].ReadsCached) > 1e-5 {
				t.Errorf("ratio %g part %d: inspect %+v, graph.toml %+v", ratio, p, s, m.Part[p])
			}
		}
		hit := r.Reads.Local + r.Reads.Cached
		if ratio == 0 && r.Reads.Cached != 0 || i > 0 && hit <= prev {
			t.Errorf("ratio %g: local+cached %.4f, previous ratio %.4f", ratio, hit, prev)
		}
		prev = hit
		var out strings.Builder
		r.Format(&out)
		if !strings.Contains(out.String(), "reads local %") || !strings.Contains(out.String(), "expected feature reads per epoch (fanouts 5,3, batch 16") {
			t.Errorf("report lacks the read columns:\n%s", out.String())
		}
		// Other fanouts give other shares.
		r2, err := Inspect(context.Background(), dir, InspectOptions{Fanouts: []int{-1}})
		if err != nil || r2.ReadBatch != 0 || r2.Reads.Reads == r.Reads.Reads {
			t.Errorf("ratio %g: --fanouts -1: %v, reads %g (batch %d) vs %g", ratio, err, r2.Reads.Reads, r2.ReadBatch, r.Reads.Reads)
		}
	}
}

func TestWriteCacheBytes(t *testing.T) {
	dir, m, _, _, _ := cacheDir(t, MethodFreq, CacheOptions{Bytes: 200}) // 10 rows of 3 × f32 and their 8-byte ids
	for p, e := range m.Part {
		if e.Cache != 10 {
			t.Errorf("part %d: %d cached, want 10", p, e.Cache)
		}
	}
	if m.CacheBytes != 200 || m.CacheRatio != 0 {
		t.Errorf("manifest cache %g / %d", m.CacheRatio, m.CacheBytes)
	}
	if _, err := OpenDir(dir); err != nil {
		t.Fatal(err)
	}
}

// TestReadsOfTrainerShares: node p's trainer (rank p of as many trainers
// as parts, split "train") reads its contiguous share of the training
// nodes in global id order, whichever part owns them; graph.toml, the
// cache and inspect must estimate those reads, not those of the
// training nodes part p happens to own. Here part 0 owns every training
// node, so parts 1 and 2 still read a third each, all of it remote or
// cached.
func TestReadsOfTrainerShares(t *testing.T) {
	ctx := context.Background()
	g := testGraph(600, 3000, false, false)
	adj, err := BuildAdj(ctx, g, csr.In, CleanOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fanouts := []int{5, 3}
	assign, err := Assign(ctx, g, adj, AssignOptions{Method: MethodRandom, Parts: 3, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	g.Train = nil
	for v := range uint32(g.NumNodes) {
		if assign[v] == 0 && v%2 == 0 {
			g.Train = append(g.Train, v)
		}
	}
	dir := filepath.Join(t.TempDir(), "parts")
	m, err := Write(ctx, dir, g, adj, assign, WriteOptions{Parts: 3, Method: MethodRandom, Seed: 2, Fanouts: fanouts, BatchSize: 16, Cache: CacheOptions{Ratio: 0.2}})
	if err != nil {
		t.Fatal(err)
	}
	// New ids number part 0 first, in old index order: the training
	// nodes in global id order are g.Train sorted by (part, index).
	train := slices.Clone(g.Train)
	slices.SortFunc(train, func(a, b uint32) int { return cmp.Or(cmp.Compare(assign[a], assign[b]), cmp.Compare(a, b)) })
	q := len(train) / 3
	seeds := [][]uint32{train[:q+min(1, len(train)%3)], nil, train[len(train)-q:]}
	seeds[1] = train[len(seeds[0]) : len(train)-q]
	heat, err := EstimateHeat(ctx, adj, seeds, HeatOptions{Fanouts: fanouts, BatchSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	for p := range 3 {
		if want := heat.Total(p); math.Abs(m.Part[p].Reads-want) > 1e-3*want || want == 0 {
			t.Errorf("part %d: graph.toml reads %g, want %g (rank %d's %d seeds)", p, m.Part[p].Reads, want, p, len(seeds[p]))
		}
	}
	if m.Part[1].ReadsLocal > 0.5 || m.Part[1].ReadsCached == 0 {
		t.Errorf("part 1 owns none of its trainer's seeds: local %g cached %g", m.Part[1].ReadsLocal, m.Part[1].ReadsCached)
	}
	r, err := Inspect(ctx, dir, InspectOptions{Verify: true})
	if err != nil || !r.OK() {
		t.Fatalf("inspect --verify: %v %+v", err, r)
	}
	for p, pr := range r.Parts {
		if math.Abs(pr.Reads.Reads-m.Part[p].Reads) > 1e-3*m.Part[p].Reads {
			t.Errorf("part %d: inspect reads %g, graph.toml %g", p, pr.Reads.Reads, m.Part[p].Reads)
		}
	}
}
