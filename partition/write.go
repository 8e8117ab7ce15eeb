package partition

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	"github.com/RoaringBitmap/roaring/v2"

	"graphnode/csr"
)

// WriteOptions tune Write and are recorded in graph.toml.
type WriteOptions struct {
	Parts int // number of partitions; assign values are below it
	// Force replaces an existing non-empty output directory.
	Force bool
	// Checked is the caller's CheckOutput of dir, run before the work
	// that precedes Write (reading and partitioning the graph, hours on
	// the largest): the run began there, and what dir holds by now that
	// the check did not see appeared during it. nil: the run is Write's.
	Checked *OutputCheck
	// FeatType is csr.TypeF32 (the default) or csr.TypeF16.
	FeatType csr.ElemType
	// Method, Seed, Clean, Split, Balance and Imbalance are recorded,
	// not applied.
	Method    string
	Seed      uint64
	Clean     CleanOptions
	Split     string
	Balance   []string
	Imbalance float64
	// Fanouts, when set and the graph has training nodes, make Write
	// estimate every partition's feature reads (EstimateHeat over each
	// part's own training nodes, as its trainer samples them) and record
	// the local / cached / remote shares in graph.toml. A cache needs them.
	Fanouts []int
	// BatchSize is the trainers' batch size for the estimate (HeatOptions).
	BatchSize int
	// Cache asks for the hot nodes of other partitions in every part file.
	Cache CacheOptions
	// Workers is the number of goroutines of the estimate; 0 = GOMAXPROCS.
	Workers int
	// Progress, when set, hears how many edges have been written.
	Progress Progress

	classes int // classes for the part files' meta, set by checkWriteGraph
}

// Write relabels g's nodes by partition and writes the parts/ directory
// at dir: part-K/part.csr for every K, orig_ids.bin, names.txt for string
// ids, triples and relations for knowledge graphs, and graph.toml last.
//
// New ids are given partition by partition, and within a partition in
// old index order, so partition p owns [start_p, end_p). Everything is
// written into a temporary sibling directory that is renamed into place
// at the end, or, when dir is an existing empty directory (a disk
// mounted for the partitions), into a temporary directory in it whose
// entries are moved up, graph.toml last; an existing non-empty dir is
// refused unless opts.Force, and then replaced by exchanging the new
// one with it and removing the old: at every moment dir holds a whole
// partitioning, where the file system can exchange two names in one
// rename (see replaceDir). (So replacing needs room for both; an error
// for a full disk says so. A mount point cannot be replaced so and is
// refused.) Nothing that appears in dir during the run (from
// opts.Checked, else from Write's start) is replaced or removed unless
// dir held something then and opts.Force replaces it (and what appeared
// in it, which cannot be told apart): Write fails naming what appeared
// and the temporary directory that holds the finished partitioning,
// which it leaves (see placeNew). A dir that is a symbolic link is
// written where it points; the link stays. Parent directories that do
// not exist are made, as by mkdir -p.
//
// Write reads adj and g without changing them; it may run its partitions
// on all cores.
func Write(ctx context.Context, dir string, g *Graph, adj *Adj, assign []uint32, opts WriteOptions) (_ *Manifest, err error) {
	if err := checkWrite(g, adj, assign, &opts); err != nil {
		return nil, err
	}
	replacing, err := checkOutput(dir, opts.Force)
	if c := opts.Checked; c != nil {
		if c.dir != dir || c.force != opts.Force {
			return nil, fmt.Errorf("partition: write %s (force %t): checked %s (force %t)", dir, opts.Force, c.dir, c.force)
		}
		// dir passed the check before the input was read and
		// partitioned: refusing what it holds now threw that work
		// away. It appeared since, and only what dir held at the
		// check is replaced: placeNew keeps the rest.
		var held *heldError
		if errors.As(err, &held) {
			err = nil
		}
		replacing = replacing && c.replacing
	}
	if err != nil {
		return nil, err
	}
	if replacing {
		defer func() {
			if errors.Is(err, syscall.ENOSPC) {
				err = fmt.Errorf("%w (--force keeps the partitioning in %s until the new one is complete: remove it to free its space)", err, dir)
			}
		}()
	}
	// An output that is a symbolic link (parts/ linked to a larger disk)
	// is written where it points: the temporary directory beside the
	// link, renamed over it, put the files on the link's file system and
	// replaced the link.
	dir = resolved(dir)
	// "." and ".." by their names: renaming "." aside fails (EBUSY), and
	// the temporary directory beside "." is inside it.
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	rl := relabel(assign, opts.Parts)
	tmp, into, err := makeTemp(dir, replacing)
	if err != nil {
		return nil, err
	}
	ok, kept, staging := false, false, true
	defer func() {
		if !ok && !kept {
			os.RemoveAll(tmp)
		}
		if err != nil && staging {
			err = &stagedError{err: err, tmp: tmp, dir: dir}
		}
	}()

	m := newManifest(g, adj, rl, opts)
	cache, err := estimateReads(ctx, g, adj, assign, rl, &opts, m)
	if err != nil {
		return nil, err
	}
	files, err := writeParts(ctx, tmp, g, adj, rl, &opts, m, cache)
	if err != nil {
		return nil, err
	}
	more, err := writeIDs(ctx, tmp, g, rl)
	if err != nil {
		return nil, err
	}
	files = append(files, more...)
	slices.SortFunc(files, func(a, b FileEntry) int {
		if a.Path < b.Path {
			return -1
		}
		if a.Path > b.Path {
			return 1
		}
		return 0
	})
	m.File = files
	nb, eb, tb := m.Balance()
	m.Achieved = BalanceAchieved{Nodes: round6(nb), Edges: round6(eb), Train: round6(tb)}
	if err := m.SetChecksum(); err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("partition: manifest of %s: %w", dir, err)
	}
	if _, err := writeFile(tmp, ManifestFile, m.Encode); err != nil {
		return nil, err
	}
	if err := SyncDir(tmp); err != nil {
		return nil, err
	}
	staging = false // the errors of the moves name both places
	if replacing {
		err = replaceDir(tmp, dir)
	} else {
		// dir was absent or empty as the run began: what appeared in
		// it since is the user's or another run's. placeNew keeps it,
		// and keeps tmp, the finished work, when dir cannot take it.
		err = placeNew(tmp, dir, into, opts.Force)
	}
	// Their errors say what tmp holds by then: the finished work, or
	// the previous partitioning that replaceDir swapped out of dir.
	kept = err != nil
	if err != nil {
		return nil, err
	}
	ok = true
	return m, nil
}

// stagedError is an error of writing the partitioning into its temporary
// directory tmp, told as of the output directory dir: the user asked for
// dir/part-0/part.csr, and tmp is gone by the time they read it.
type stagedError struct {
	err      error
	tmp, dir string
}

func (e *stagedError) Error() string { return strings.ReplaceAll(e.err.Error(), e.tmp, e.dir) }
func (e *stagedError) Unwrap() error { return e.err }

// checkWrite checks that g, adj and assign agree, and g and opts.
func checkWrite(g *Graph, adj *Adj, assign []uint32, opts *WriteOptions) error {
	if err := checkWriteGraph(g, opts); err != nil {
		return err
	}
	n := g.NumNodes
	switch {
	case adj.NumNodes() != n:
		return fmt.Errorf("partition: write: adjacency has %d rows for %d nodes", adj.NumNodes(), n)
	case len(assign) != n:
		return fmt.Errorf("partition: write: %d assignments for %d nodes", len(assign), n)
	}
	for v, p := range assign {
		if int(p) >= opts.Parts {
			return fmt.Errorf("partition: write: node index %d assigned to part %d of %d", v, p, opts.Parts)
		}
	}
	return nil
}

// CheckWrite reports what Write would refuse about g and opts alone: a
// caller runs it before Assign, which can take hours on a large graph,
// so that an option the graph cannot take (a cache without features,
// features float16 cannot hold) is refused first. Write checks again.
func CheckWrite(g *Graph, opts WriteOptions) error { return checkWriteGraph(g, &opts) }

// checkWriteGraph checks g and opts, and sets opts' defaults and classes.
func checkWriteGraph(g *Graph, opts *WriteOptions) error {
	n := g.NumNodes
	switch {
	case opts.Parts < 1:
		return fmt.Errorf("partition: write: %d parts", opts.Parts)
	case g.Feat != nil && len(g.Feat) != n*g.FeatDim:
		return fmt.Errorf("partition: write: %d feature values for %d nodes × %d", len(g.Feat), n, g.FeatDim)
	case g.Labels != nil && len(g.Labels) != n*g.LabelDim:
		return fmt.Errorf("partition: write: %d label values for %d nodes × %d", len(g.Labels), n, g.LabelDim)
	case g.IDs.Ints != nil && len(g.IDs.Ints) != n, g.IDs.Names != nil && len(g.IDs.Names) != n:
		return fmt.Errorf("partition: write: id map does not have %d entries", n)
	}
	// graph.toml records the name and the class names; TOML holds UTF-8
	// only (a Latin-1 label of a LINQS file, a file name in another
	// encoding), and the directory would be written whole and unreadable.
	if !utf8.ValidString(g.Name) {
		return fmt.Errorf("partition: write: graph name %q is not UTF-8, which graph.toml cannot hold: give a UTF-8 name (node partition --name)", g.Name)
	}
	for c, name := range g.ClassNames {
		if !utf8.ValidString(name) {
			return fmt.Errorf("partition: write: graph %q: class %d is named %q, not UTF-8, which graph.toml cannot hold: convert the labels of the input to UTF-8", g.Name, c, name)
		}
	}
	opts.classes = g.NumClasses
	if g.LabelDim > 1 {
		opts.classes = g.LabelDim
	}
	if g.LabelDim == 1 && opts.classes == 0 {
		for _, l := range g.Labels {
			opts.classes = max(opts.classes, int(l)+1)
		}
		opts.classes = max(opts.classes, 1)
	}
	switch opts.FeatType {
	case 0:
		opts.FeatType = csr.TypeF32
	case csr.TypeF32, csr.TypeF16:
	default:
		return fmt.Errorf("partition: write: feature type %s: want f32 or f16", opts.FeatType)
	}
	if opts.FeatType == csr.TypeF16 && g.FeatDim > 0 {
		if err := checkF16(g); err != nil {
			return err
		}
	}
	if err := opts.Cache.Validate(rowBytesOf(g, opts.FeatType)); err != nil {
		return err
	}
	if opts.Fanouts != nil {
		if err := ValidFanouts(opts.Fanouts); err != nil {
			return err
		}
	}
	if opts.Cache.On() && (opts.Fanouts == nil || len(g.Train) == 0) {
		return fmt.Errorf("partition: write: a cache needs fanouts and a training split to rank the hot nodes (graph %q has %d training nodes)", g.Name, len(g.Train))
	}
	return nil
}

// checkF16 refuses features that float16 cannot hold: F32ToF16 makes
// them infinite, which the readers refuse in the input because one such
// value turns every parameter of a trainer that reads it into NaN.
func checkF16(g *Graph) error {
	for i, v := range g.Feat {
		if h := F32ToF16(v); h&0x7c00 == 0x7c00 {
			return fmt.Errorf("partition: write: node %s: feature %d of %d is %g, beyond float16's range (±65504), where it would be infinite: write f32 features or scale them",
				nodeName(g, uint32(i/g.FeatDim)), i%g.FeatDim+1, g.FeatDim, v)
		}
	}
	return nil
}

// relabeling maps old node indices to new ids and back.
type relabeling struct {
	bounds []uint64 // P+1
	newID  []uint32 // old index -> new id
	oldOf  []uint32 // new id -> old index
}

// relabel numbers nodes partition by partition, in old index order.
func relabel(assign []uint32, parts int) *relabeling {
	bounds := make([]uint64, parts+1)
	for _, p := range assign {
		bounds[p+1]++
	}
	for p := 1; p <= parts; p++ {
		bounds[p] += bounds[p-1]
	}
	cursor := slices.Clone(bounds[:parts])
	rl := &relabeling{bounds: bounds, newID: make([]uint32, len(assign)), oldOf: make([]uint32, len(assign))}
	for old, p := range assign {
		id := cursor[p]
		cursor[p]++
		rl.newID[old] = uint32(id)
		rl.oldOf[id] = uint32(old)
	}
	return rl
}

// newManifest fills everything but the files and the per-part counts.
func newManifest(g *Graph, adj *Adj, rl *relabeling, opts WriteOptions) *Manifest {
	m := &Manifest{
		Version:     ManifestVersion,
		Name:        g.Name,
		Nodes:       uint64(g.NumNodes),
		Edges:       adj.NumEdges(),
		Parts:       opts.Parts,
		Method:      opts.Method,
		Seed:        opts.Seed,
		Direction:   adj.Direction.String(),
		Undirected:  opts.Clean.Undirected,
		SelfLoops:   string(opts.Clean.SelfLoops),
		Duplicates:  string(opts.Clean.Duplicates),
		Split:       opts.Split,
		IDKind:      "int",
		LabelDim:    g.LabelDim,
		Classes:     opts.classes,
		ClassNames:  g.ClassNames,
		Train:       uint64(len(g.Train)),
		Val:         uint64(len(g.Val)),
		Test:        uint64(len(g.Test)),
		Stats:       StatsMap(g.Stats),
		Part:        make([]PartEntry, opts.Parts),
		Fanouts:     opts.Fanouts,
		BatchSize:   opts.BatchSize,
		Constraints: opts.Balance,
		Imbalance:   opts.Imbalance,
		CacheRatio:  opts.Cache.Ratio,
		CacheBytes:  opts.Cache.Bytes,
	}
	if len(g.Train) == 0 || opts.Fanouts == nil {
		m.Fanouts, m.BatchSize = nil, 0 // nothing was estimated
	}
	if m.Split == "" {
		m.Split = string(SplitKeep)
	}
	if g.Labels == nil {
		m.LabelDim = 0
	}
	if c, err := opts.Clean.withDefaults(); err == nil {
		m.SelfLoops, m.Duplicates = string(c.SelfLoops), string(c.Duplicates)
	}
	if g.IDs.Names != nil {
		m.IDKind = "string"
	}
	if g.Feat != nil && g.FeatDim > 0 {
		m.FeatDim = g.FeatDim
		m.FeatDtype = opts.FeatType.String()
	}
	if g.KG != nil {
		m.Relations = len(g.KG.RelationNames)
		m.TriplesValid = uint64(g.KG.Valid.Len())
		m.TriplesTest = uint64(g.KG.Test.Len())
	}
	for p := range m.Part {
		m.Part[p] = PartEntry{Index: p, Start: rl.bounds[p], End: rl.bounds[p+1]}
	}
	return m
}

// splitMasks builds, for each split and partition, the bitmap of local
// indices; nil for a split the graph does not have.
func splitMasks(g *Graph, rl *relabeling, parts int) [3][]*roaring.Bitmap {
	var out [3][]*roaring.Bitmap
	for s, ids := range [3][]uint32{g.Train, g.Val, g.Test} {
		if ids == nil {
			continue
		}
		out[s] = make([]*roaring.Bitmap, parts)
		for p := range out[s] {
			out[s][p] = roaring.New()
		}
		for _, old := range ids {
			id := uint64(rl.newID[old])
			p := ownerOf(rl.bounds, id)
			out[s][p].Add(uint32(id - rl.bounds[p]))
		}
		for _, b := range out[s] {
			b.RunOptimize()
		}
	}
	return out
}

// ownerOf is the partition whose range holds id.
func ownerOf(bounds []uint64, id uint64) int {
	p, _ := slices.BinarySearch(bounds, id+1)
	return p - 1
}

// writeParts writes every part file, on all cores, and returns their
// file entries; it fills the per-part counts of m.
func writeParts(ctx context.Context, tmp string, g *Graph, adj *Adj, rl *relabeling, opts *WriteOptions, m *Manifest, cache [][]uint32) ([]FileEntry, error) {
	masks := splitMasks(g, rl, opts.Parts)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	files := make([]FileEntry, opts.Parts)
	errs := make([]error, opts.Parts)
	var next int
	var mu sync.Mutex
	var written int64
	report := func(edges int64) {
		mu.Lock()
		written += edges
		opts.Progress.report("write", written, int64(adj.NumEdges()))
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for range rowWorkers(opts.Parts) {
		wg.Go(func() {
			for {
				mu.Lock()
				p := next
				next++
				mu.Unlock()
				if p >= opts.Parts || ctx.Err() != nil {
					return
				}
				pw := &partWriter{g: g, adj: adj, rl: rl, opts: opts, part: p, masks: masks, report: report}
				if cache != nil {
					pw.cache = cache[p]
				}
				files[p], errs[p] = pw.write(ctx, tmp, &m.Part[p])
				if errs[p] != nil {
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	// The first failure cancelled the others: report it, not theirs.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	opts.Progress.report("write", int64(adj.NumEdges()), int64(adj.NumEdges()))
	return files, nil
}
