package partition

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"graphnode/csr"
)

// CacheOptions say how many hot nodes of other partitions every part file
// caches (sections cache_ids and cache_feat, DESIGN.md §4 and §8). At
// most one of Ratio and Bytes is set; both zero means no cache.
type CacheOptions struct {
	// Ratio caches up to Ratio × (nodes the part owns) nodes.
	Ratio float64
	// Bytes caches up to Bytes / (bytes of one feature row + 8) nodes:
	// a cached node costs its row in cache_feat and its id in cache_ids.
	Bytes int64
}

// On reports whether a cache is asked for.
func (o CacheOptions) On() bool { return o.Ratio > 0 || o.Bytes > 0 }

// Validate checks the options against the feature row size in bytes; a
// negative rowBytes (the graph not read yet) checks the options alone.
func (o CacheOptions) Validate(rowBytes int) error {
	var errs []error
	if o.Ratio < 0 || math.IsNaN(o.Ratio) || math.IsInf(o.Ratio, 0) {
		errs = append(errs, fmt.Errorf("partition: cache ratio %g: want a number ≥ 0", o.Ratio))
	}
	if o.Bytes < 0 {
		errs = append(errs, fmt.Errorf("partition: cache bytes %d: want ≥ 0", o.Bytes))
	}
	if o.Ratio > 0 && o.Bytes > 0 {
		errs = append(errs, fmt.Errorf("partition: cache ratio %g and cache bytes %d: give one of them", o.Ratio, o.Bytes))
	}
	if len(errs) == 0 && o.On() && rowBytes == 0 {
		errs = append(errs, fmt.Errorf("partition: cache: the graph has no features to cache (a cache holds feature rows: leave out --cache-ratio and --cache-bytes)"))
	}
	return errors.Join(errs...)
}

// cacheIDBytes is what a cached node's id takes in cache_ids (u64).
const cacheIDBytes = 8

// Limit is how many nodes a part that owns owned nodes may cache.
func (o CacheOptions) Limit(owned uint64, rowBytes int) uint64 {
	switch {
	case o.Ratio > 0:
		return uint64(math.Floor(o.Ratio * float64(owned)))
	case o.Bytes > 0 && rowBytes > 0:
		return uint64(o.Bytes) / (uint64(rowBytes) + cacheIDBytes)
	}
	return 0
}

// SelectCache picks, for every partition p, the nodes it caches: the
// hottest by p's heat among the nodes with some heat that p does not own
// (owner[v] != p), at most limit[p] of them; ties go to the lower index.
// Each list is returned sorted ascending. Parts are handled in parallel.
func SelectCache(ctx context.Context, heat *Heat, owner []uint32, limit []uint64) ([][]uint32, error) {
	P := heat.Parts
	if len(owner) != heat.NumNodes() || len(limit) != P {
		return nil, fmt.Errorf("partition: cache: %d owners and %d limits for %d nodes and %d parts", len(owner), len(limit), heat.NumNodes(), P)
	}
	out := make([][]uint32, P)
	var wg sync.WaitGroup
	sem := make(chan struct{}, rowWorkers(P))
	for p := range P {
		if limit[p] == 0 {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if ctx.Err() != nil {
				return
			}
			var cand []uint32
			for v, o := range owner {
				if int(o) != p && heat.Val[v*P+p] > 0 {
					cand = append(cand, uint32(v))
				}
			}
			slices.SortFunc(cand, func(a, b uint32) int {
				return cmp.Or(cmp.Compare(heat.At(b, p), heat.At(a, p)), cmp.Compare(a, b))
			})
			cand = cand[:min(uint64(len(cand)), limit[p])]
			slices.Sort(cand)
			out[p] = slices.Clip(cand)
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// ReadShares split a partition's expected feature reads by where they
// are served: rows it owns, rows in its cache, rows pulled from peers.
// The three add up to 1 (all zero when the partition reads nothing).
type ReadShares struct {
	Local, Cached, Remote float64
	Reads                 float64 // expected reads in one epoch (the heat total)
}

// EstimateShares computes every partition's ReadShares from its heat,
// the owner of every node and its cache (as SelectCache returns it, in
// the same index space as heat).
func EstimateShares(heat *Heat, owner []uint32, cache [][]uint32) []ReadShares {
	P := heat.Parts
	local := make([]float64, P)
	total := make([]float64, P)
	for v, o := range owner {
		row := heat.Val[v*P : (v+1)*P]
		for p, h := range row {
			total[p] += float64(h)
		}
		local[o] += float64(row[o])
	}
	out := make([]ReadShares, P)
	for p := range P {
		var cached float64
		if p < len(cache) {
			for _, v := range cache[p] {
				cached += float64(heat.At(v, p))
			}
		}
		if total[p] == 0 {
			continue
		}
		s := ReadShares{Local: local[p] / total[p], Cached: cached / total[p], Reads: total[p]}
		s.Remote = max(0, 1-s.Local-s.Cached)
		out[p] = s
	}
	return out
}

// TotalShares combines per-partition shares, weighted by their reads.
func TotalShares(parts []ReadShares) ReadShares {
	var t ReadShares
	for _, s := range parts {
		t.Local += s.Local * s.Reads
		t.Cached += s.Cached * s.Reads
		t.Remote += s.Remote * s.Reads
		t.Reads += s.Reads
	}
	if t.Reads > 0 {
		t.Local, t.Cached, t.Remote = t.Local/t.Reads, t.Cached/t.Reads, t.Remote/t.Reads
	}
	return t
}

// rowBytesOf is the size of one feature row on disk.
func rowBytesOf(g *Graph, t csr.ElemType) int {
	if g.Feat == nil {
		return 0
	}
	return g.FeatDim * t.Size()
}

// round6 rounds x to 6 decimals, for the floats of graph.toml.
func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }

// estimateReads estimates the feature reads of every partition's trainer
// (its share of the training nodes, TrainerSeeds), picks the caches by
// them, and records both in m. It returns every partition's cache in new
// ids, ascending (nil without a cache).
func estimateReads(ctx context.Context, g *Graph, adj *Adj, assign []uint32, rl *relabeling, opts *WriteOptions, m *Manifest) ([][]uint32, error) {
	if opts.Fanouts == nil || len(g.Train) == 0 {
		return nil, nil
	}
	train := slices.Clone(g.Train)
	slices.SortFunc(train, func(a, b uint32) int { return cmp.Compare(rl.newID[a], rl.newID[b]) })
	seeds := TrainerSeeds(train, opts.Parts)
	heat, err := EstimateHeat(ctx, adj, seeds, HeatOptions{Fanouts: opts.Fanouts, BatchSize: opts.BatchSize, Workers: opts.Workers})
	if err != nil {
		return nil, err
	}
	var cache [][]uint32
	if opts.Cache.On() {
		limit := make([]uint64, opts.Parts)
		for p := range limit {
			limit[p] = opts.Cache.Limit(rl.bounds[p+1]-rl.bounds[p], rowBytesOf(g, opts.FeatType))
		}
		if cache, err = SelectCache(ctx, heat, assign, limit); err != nil {
			return nil, err
		}
	}
	shares := EstimateShares(heat, assign, cache)
	for p, s := range shares {
		e := &m.Part[p]
		e.ReadsLocal, e.ReadsCached, e.ReadsRemote = round6(s.Local), round6(s.Cached), round6(s.Remote)
		e.Reads = round6(s.Reads)
	}
	if cache == nil {
		return nil, nil
	}
	for p, c := range cache {
		for i, old := range c {
			c[i] = rl.newID[old]
		}
		slices.Sort(c)
		m.Part[p].Cache = uint64(len(c))
	}
	return cache, nil
}

// achievedProblems checks balance_achieved against the partitions'
// counts; problems() calls it only when those counts are consistent.
func (m *Manifest) achievedProblems(file string) []error {
	if (m.Achieved == BalanceAchieved{}) {
		return nil
	}
	var errs []error
	nb, eb, tb := m.Balance()
	for _, c := range []struct {
		key       string
		got, want float64
	}{{"nodes", m.Achieved.Nodes, nb}, {"edges", m.Achieved.Edges, eb}, {"train", m.Achieved.Train, tb}} {
		if math.Abs(c.got-c.want) > shareSlack {
			errs = append(errs, fmt.Errorf("partition: %s: key %q: is %g, but the partitions' counts give %g: %w",
				file, "balance_achieved."+c.key, c.got, c.want, ErrManifest))
		}
	}
	return errs
}

// shareSlack is how far graph.toml's rounded floats may be off.
const shareSlack = 1e-5

// estimateProblems checks the balance, cache and read-estimate keys.
func (m *Manifest) estimateProblems(file string) []error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("partition: %s: key %q: %s: %w", file, key, fmt.Sprintf(format, a...), ErrManifest))
	}
	for i, k := range m.Constraints {
		if k != BalanceNodes && k != BalanceEdges && k != BalanceTrain {
			bad(fmt.Sprintf("balance[%d]", i), "is %q, want nodes, edges or train", k)
		}
	}
	if m.Imbalance != 0 && !(m.Imbalance >= 1) {
		bad("imbalance", "is %g, want ≥ 1", m.Imbalance)
	}
	if err := ValidFanouts(m.Fanouts); len(m.Fanouts) > 0 && err != nil {
		bad("fanouts", "%v", err)
	}
	if m.BatchSize < 0 {
		bad("batch_size", "is %d, want ≥ 0", m.BatchSize)
	}
	cacheOn := m.CacheRatio != 0 || m.CacheBytes != 0
	switch {
	case !(m.CacheRatio >= 0) || math.IsInf(m.CacheRatio, 0):
		bad("cache_ratio", "is %g, want ≥ 0", m.CacheRatio)
	case m.CacheBytes < 0:
		bad("cache_bytes", "is %d, want ≥ 0", m.CacheBytes)
	case m.CacheRatio > 0 && m.CacheBytes > 0:
		bad("cache_bytes", "is set together with cache_ratio")
	case cacheOn && len(m.Fanouts) == 0:
		bad("fanouts", "missing: a cache is ranked by the read estimate")
	}
	rowBytes := uint64(m.FeatDim) * 4
	if m.FeatDtype == "f16" {
		rowBytes = uint64(m.FeatDim) * 2
	}
	for i, p := range m.Part {
		key := fmt.Sprintf("part[%d]", i)
		owned := p.End - p.Start
		opts := CacheOptions{Ratio: m.CacheRatio, Bytes: m.CacheBytes}
		switch {
		case p.End < p.Start:
		case !cacheOn && p.Cache > 0:
			bad(key+".cache", "is %d without cache_ratio or cache_bytes", p.Cache)
		case cacheOn && p.Cache > opts.Limit(owned, int(rowBytes)):
			bad(key+".cache", "is %d, more than the %d the cache bound allows", p.Cache, opts.Limit(owned, int(rowBytes)))
		case p.Cache > m.Nodes-min(m.Nodes, owned):
			bad(key+".cache", "is %d, more than the %d nodes owned elsewhere", p.Cache, m.Nodes-owned)
		}
		shares := []float64{p.ReadsLocal, p.ReadsCached, p.ReadsRemote}
		sum := 0.0
		for _, s := range shares {
			if !(s >= 0 && s <= 1+shareSlack) {
				bad(key+".reads_local", "shares %v: each must lie in [0, 1]", shares)
			}
			sum += s
		}
		if p.Reads > 0 && math.Abs(sum-1) > 3*shareSlack {
			bad(key+".reads_local", "shares %v add up to %g, want 1", shares, sum)
		}
		if !(p.Reads >= 0) {
			bad(key+".reads", "is %g, want ≥ 0", p.Reads)
		}
		if p.Reads == 0 && sum != 0 {
			bad(key+".reads", "is 0 but the shares are %v", shares)
		}
		if !cacheOn && p.ReadsCached != 0 {
			bad(key+".reads_cached", "is %g without a cache", p.ReadsCached)
		}
	}
	return errs
}
