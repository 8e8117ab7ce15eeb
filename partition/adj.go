package partition

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"

	"graphnode/csr"
)

// CleanOptions are the policies BuildAdj applies while it builds the
// adjacency. The zero value keeps self loops and drops duplicates.
type CleanOptions struct {
	// SelfLoops: keep (default), drop or error.
	SelfLoops Policy
	// Duplicates: drop (default), keep or error. Two edges are duplicates
	// when they join the same (u, v) and, for knowledge graphs, carry the
	// same relation: different relations between one pair are distinct
	// edges. Of dropped duplicates the first in input order survives, with
	// its weight.
	Duplicates Policy
	// Undirected adds the reverse v -> u of every edge u -> v (self loops
	// excepted), counted in Stats.ReverseAdded. A reverse that meets an
	// edge already in the input is a duplicate like any other.
	Undirected bool
}

// Validate checks the policies (empty ones take their defaults).
func (o CleanOptions) Validate() error {
	_, err := o.withDefaults()
	return err
}

// withDefaults fills empty policies and checks the rest.
func (o CleanOptions) withDefaults() (CleanOptions, error) {
	if o.SelfLoops == "" {
		o.SelfLoops = Keep
	}
	if o.Duplicates == "" {
		o.Duplicates = Drop
	}
	var err, errs error
	if o.SelfLoops, err = ParsePolicy(string(o.SelfLoops), Keep, Drop, Error); err != nil {
		errs = fmt.Errorf("%w (self loops)", err)
	}
	if o.Duplicates, err = ParsePolicy(string(o.Duplicates), Keep, Drop, Error); err != nil {
		errs = errors.Join(errs, fmt.Errorf("%w (duplicates)", err))
	}
	return o, errs
}

// Adj is a graph in compressed sparse rows keyed by the node that is
// expanded when sampling: with Direction In, row v lists the sources of
// v's in-edges; with Out, the destinations of its out-edges. Every row is
// sorted ascending (by neighbour, then relation); Weights and Etypes, when
// present, are aligned with Indices.
type Adj struct {
	Direction csr.Direction
	Indptr    []uint64 // NumNodes+1 offsets into Indices
	Indices   []uint32 // neighbour node indices
	Weights   []float32
	Etypes    []uint32
}

// NumNodes is the number of rows.
func (a *Adj) NumNodes() int { return len(a.Indptr) - 1 }

// NumEdges is the number of stored edges.
func (a *Adj) NumEdges() uint64 { return a.Indptr[len(a.Indptr)-1] }

// Row is the neighbour list of node v.
func (a *Adj) Row(v uint32) []uint32 { return a.Indices[a.Indptr[v]:a.Indptr[v+1]] }

// Degree is the length of v's row.
func (a *Adj) Degree(v uint32) int { return int(a.Indptr[v+1] - a.Indptr[v]) }

// cancelEvery is how many edges a per-edge loop handles between two
// looks at its context.
const cancelEvery = 1 << 20

// BuildAdj builds g's adjacency for direction dir, applying the cleaning
// policies of opts, and records in g.Stats what they did (SelfLoops,
// SelfLoopsDrop, Duplicates, ReverseAdded).
//
// BuildAdj consumes the edge arrays: on success g.Src, g.Dst, g.Weights
// and g.Etypes are set to nil, so that their memory is freed while the
// caller goes on. Peak memory is about Src + Dst + Indices (+ weights and
// relations), plus 8 bytes per node. Rows are sorted on all cores.
func BuildAdj(ctx context.Context, g *Graph, dir csr.Direction, opts CleanOptions, progress Progress) (*Adj, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(g.Src) != len(g.Dst) {
		return nil, fmt.Errorf("partition: graph %q: %d sources but %d destinations", g.Name, len(g.Src), len(g.Dst))
	}
	m := len(g.Src)
	if g.Weights != nil && len(g.Weights) != m {
		return nil, fmt.Errorf("partition: graph %q: %d weights for %d edges", g.Name, len(g.Weights), m)
	}
	if g.Etypes != nil && len(g.Etypes) != m {
		return nil, fmt.Errorf("partition: graph %q: %d relations for %d edges", g.Name, len(g.Etypes), m)
	}
	n := g.NumNodes
	if n < 0 || n > math.MaxUint32 {
		return nil, fmt.Errorf("partition: graph %q: %d nodes: want 0..%d", g.Name, n, uint32(math.MaxUint32))
	}
	owner, other := g.Dst, g.Src
	if dir == csr.Out {
		owner, other = g.Src, g.Dst
	}

	// Pass 1: count each row's length in indptr[v] (shifted into place
	// by the fill below), check ids, count self loops.
	const stage = "build adjacency"
	indptr := make([]uint64, n+1)
	var loops int64
	var loopIdx []int
	for e := 0; e < m; e++ {
		if e%cancelEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			progress.report(stage, int64(e), 2*int64(m))
		}
		u, v := owner[e], other[e]
		if int(u) >= n || int(v) >= n {
			return nil, fmt.Errorf("partition: graph %q: edge %d (%d -> %d) names a node beyond %d nodes", g.Name, e, g.Src[e], g.Dst[e], n)
		}
		if u == v {
			loops++
			if opts.SelfLoops == Error && len(loopIdx) < maxNamed {
				loopIdx = append(loopIdx, int(u))
			}
			if opts.SelfLoops == Drop {
				continue
			}
			indptr[u]++
			continue
		}
		indptr[u]++
		if opts.Undirected {
			indptr[v]++
		}
	}
	if opts.SelfLoops == Error && loops > 0 {
		return nil, fmt.Errorf("partition: graph %q: %d self loops (policy error), at nodes %s", g.Name, loops, nodeNames(g, loopIdx, loops))
	}
	var total uint64
	for v := 0; v <= n; v++ {
		c := indptr[v]
		indptr[v] = total
		total += c
	}

	// Pass 2: fill. indptr[v] is v's cursor; after the fill it holds v's
	// end, which is v+1's start, so one shift puts it back.
	indices := make([]uint32, total)
	var weights []float32
	var etypes []uint32
	if g.Weights != nil {
		weights = make([]float32, total)
	}
	if g.Etypes != nil {
		etypes = make([]uint32, total)
	}
	var reverse int64
	for e := 0; e < m; e++ {
		if e%cancelEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			progress.report(stage, int64(m)+int64(e), 2*int64(m))
		}
		u, v := owner[e], other[e]
		if u == v && opts.SelfLoops == Drop {
			continue
		}
		put(indices, weights, etypes, g, indptr, u, v, e)
		if opts.Undirected && u != v {
			put(indices, weights, etypes, g, indptr, v, u, e)
			reverse++
		}
	}
	copy(indptr[1:], indptr[:n])
	indptr[0] = 0
	progress.report(stage, 2*int64(m), 2*int64(m))

	g.Stats.SelfLoops = loops
	g.Stats.SelfLoopsDrop = 0
	if opts.SelfLoops == Drop {
		g.Stats.SelfLoopsDrop = loops
	}
	// Added to the reader's: Planetoid's adds the reverses its lists
	// lack before this; they were reported as none.
	g.Stats.ReverseAdded += reverse
	g.Src, g.Dst, g.Weights, g.Etypes = nil, nil, nil, nil

	a := &Adj{Direction: dir, Indptr: indptr, Indices: indices, Weights: weights, Etypes: etypes}
	dups, err := a.sortRows(ctx, g, opts.Duplicates, progress)
	if err != nil {
		return nil, err
	}
	g.Stats.Duplicates = dups
	return a, nil
}

// put appends edge e's neighbour v to row u.
func put(indices []uint32, weights []float32, etypes []uint32, g *Graph, cursor []uint64, u, v uint32, e int) {
	i := cursor[u]
	cursor[u]++
	indices[i] = v
	if weights != nil {
		weights[i] = g.Weights[e]
	}
	if etypes != nil {
		etypes[i] = g.Etypes[e]
	}
}

// maxNamed caps how many offending nodes an error message names.
const maxNamed = 5

// nodeNames formats the input ids of some node indices for a message.
func nodeNames(g *Graph, idx []int, total int64) string {
	s := make([]string, len(idx))
	for i, v := range idx {
		s[i] = nodeName(g, uint32(v))
	}
	out := strings.Join(s, ", ")
	if total > int64(len(idx)) {
		out += fmt.Sprintf(" and %d more", total-int64(len(idx)))
	}
	return out
}

// nodeName is node v's id as the input wrote it.
func nodeName(g *Graph, v uint32) string {
	if g.IDs.Names != nil && int(v) < len(g.IDs.Names) {
		return fmt.Sprintf("%q", g.IDs.Names[v])
	}
	if g.IDs.Ints != nil && int(v) >= len(g.IDs.Ints) {
		return fmt.Sprintf("index %d", v)
	}
	return fmt.Sprint(g.IDs.Orig(v))
}

// rowWorkers is how many goroutines sort rows: all cores.
func rowWorkers(n int) int {
	w := runtime.GOMAXPROCS(0)
	if w > n {
		w = n
	}
	return max(w, 1)
}

// dupFound is the first duplicate a worker met under policy error.
type dupFound struct {
	u, v uint32
	ok   bool
}

// sortRows sorts every row and applies the duplicates policy, returning
// how many duplicates it dropped.
func (a *Adj) sortRows(ctx context.Context, g *Graph, dups Policy, progress Progress) (int64, error) {
	const stage = "sort rows"
	n := a.NumNodes()
	workers := rowWorkers(n)
	var newLen []uint32
	if dups == Drop {
		newLen = make([]uint32, n)
	}
	dropped := make([]int64, workers)
	found := make([]dupFound, workers)
	errs := make([]error, workers)
	var done sync.WaitGroup
	var mu sync.Mutex
	var rowsDone int64
	for w := 0; w < workers; w++ {
		lo, hi := n*w/workers, n*(w+1)/workers
		done.Go(func() {
			var s rowSorter
			var edges int
			for v := lo; v < hi; v++ {
				start, end := a.Indptr[v], a.Indptr[v+1]
				s.sort(a, start, end)
				edges += int(end - start)
				if edges >= cancelEvery {
					if err := ctx.Err(); err != nil {
						errs[w] = err
						return
					}
					mu.Lock()
					rowsDone += int64(edges)
					progress.report(stage, rowsDone, int64(a.NumEdges()))
					mu.Unlock()
					edges = 0
				}
				if dups == Keep {
					continue
				}
				k := a.compactRow(start, end, dups == Drop)
				if dups == Error && k < end-start {
					found[w] = dupFound{u: uint32(v), v: a.dupAt(start, end), ok: true}
					return
				}
				if dups == Drop {
					newLen[v] = uint32(k)
					dropped[w] += int64(end-start) - int64(k)
				}
			}
		})
	}
	done.Wait()
	for w := range workers {
		if errs[w] != nil {
			return 0, errs[w]
		}
	}
	for w := range workers {
		if f := found[w]; f.ok {
			// Name the edge as the input states it: source -> destination.
			src, dst := f.v, f.u
			if a.Direction == csr.Out {
				src, dst = f.u, f.v
			}
			return 0, fmt.Errorf("partition: graph %q: duplicate edge %s -> %s (policy error)", g.Name, nodeName(g, src), nodeName(g, dst))
		}
	}
	progress.report(stage, int64(a.NumEdges()), int64(a.NumEdges()))
	var total int64
	for _, d := range dropped {
		total += d
	}
	if dups == Drop && total > 0 {
		a.squeeze(newLen)
	}
	return total, nil
}

// compactRow finds the distinct entries of the sorted row [start, end)
// and, when write is set, moves them to its front. It returns their count.
func (a *Adj) compactRow(start, end uint64, write bool) uint64 {
	if end-start < 2 {
		return end - start
	}
	k := start + 1
	for i := start + 1; i < end; i++ {
		if a.Indices[i] == a.Indices[k-1] && (a.Etypes == nil || a.Etypes[i] == a.Etypes[k-1]) {
			continue
		}
		if !write {
			k++
			continue
		}
		a.Indices[k] = a.Indices[i]
		if a.Weights != nil {
			a.Weights[k] = a.Weights[i]
		}
		if a.Etypes != nil {
			a.Etypes[k] = a.Etypes[i]
		}
		k++
	}
	return k - start
}

// dupAt is the neighbour of the first repeated entry in a sorted row.
func (a *Adj) dupAt(start, end uint64) uint32 {
	for i := start + 1; i < end; i++ {
		if a.Indices[i] == a.Indices[i-1] && (a.Etypes == nil || a.Etypes[i] == a.Etypes[i-1]) {
			return a.Indices[i]
		}
	}
	return 0
}

// squeeze closes the gaps compaction left: row v keeps its first
// newLen[v] entries. Rows only move towards the front, so one forward
// pass of overlapping copies is enough.
func (a *Adj) squeeze(newLen []uint32) {
	var out uint64
	for v := range newLen {
		start, k := a.Indptr[v], uint64(newLen[v])
		a.Indptr[v] = out
		copy(a.Indices[out:], a.Indices[start:start+k])
		if a.Weights != nil {
			copy(a.Weights[out:], a.Weights[start:start+k])
		}
		if a.Etypes != nil {
			copy(a.Etypes[out:], a.Etypes[start:start+k])
		}
		out += k
	}
	a.Indptr[len(newLen)] = out
	a.Indices = slices.Clip(a.Indices[:out])
	if a.Weights != nil {
		a.Weights = slices.Clip(a.Weights[:out])
	}
	if a.Etypes != nil {
		a.Etypes = slices.Clip(a.Etypes[:out])
	}
}

// rowSorter sorts one row at a time with reusable scratch space.
type rowSorter struct {
	keys []uint64
	w    []float32
	t    []uint32
}

// sort orders row [start, end) by (neighbour, relation), stably, so that
// of equal entries the first in input order comes first.
func (s *rowSorter) sort(a *Adj, start, end uint64) {
	row := a.Indices[start:end]
	if len(row) < 2 {
		return
	}
	if a.Weights == nil && a.Etypes == nil {
		slices.Sort(row)
		return
	}
	// Sort (neighbour, position) keys, then order each run of one
	// neighbour by relation (stable), then gather the aligned arrays.
	s.keys = s.keys[:0]
	for i, v := range row {
		s.keys = append(s.keys, uint64(v)<<32|uint64(i))
	}
	slices.Sort(s.keys)
	if a.Etypes != nil {
		et := a.Etypes[start:end]
		for i := 0; i < len(s.keys); {
			j := i + 1
			for j < len(s.keys) && s.keys[j]>>32 == s.keys[i]>>32 {
				j++
			}
			if j-i > 1 {
				slices.SortStableFunc(s.keys[i:j], func(x, y uint64) int {
					return cmp.Compare(et[uint32(x)], et[uint32(y)])
				})
			}
			i = j
		}
		s.t = append(s.t[:0], et...)
		for i, k := range s.keys {
			et[i] = s.t[uint32(k)]
		}
	}
	if a.Weights != nil {
		wt := a.Weights[start:end]
		s.w = append(s.w[:0], wt...)
		for i, k := range s.keys {
			wt[i] = s.w[uint32(k)]
		}
	}
	for i, k := range s.keys {
		row[i] = uint32(k >> 32)
	}
}
