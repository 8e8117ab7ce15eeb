package partition

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"path"
	"path/filepath"
	"slices"

	"graphnode/csr"
)

// InspectOptions tune Inspect.
type InspectOptions struct {
	// Verify checks every section's CRC-32C (csr.Open with Verify) and
	// every file's CRC-32C against graph.toml.
	Verify bool
	// Fanouts and BatchSize override graph.toml's for the expected
	// feature-read shares; nil and 0 take graph.toml's. The shares are
	// computed when fanouts are known and the graph has training nodes.
	Fanouts   []int
	BatchSize int
	// Part, when not nil, inspects that partition alone: what one host of
	// a cluster holds (graph.toml, part-K/part.csr and a knowledge graph's
	// evaluation triples, see OpenPart and EvalTriples). The
	// read shares, which need every part, are then not estimated.
	Part *int
}

// Report describes a parts/ directory.
type Report struct {
	Dir      string
	Manifest *Manifest
	OnePart  bool // InspectOptions.Part: Parts holds that part alone
	Parts    []PartReport
	Files    []FileCheck // with Verify: one per file of graph.toml
	// Unlisted, with Verify: what the directory holds besides graph.toml
	// and the files it lists (slash paths, a directory once with a
	// trailing slash): a part of another partitioning, a fetch cut off,
	// files of the user's. They are reported, not checked: they fail
	// nothing.
	Unlisted []string

	// Over all partitions.
	Edges, Cut                             uint64
	NodeBalance, EdgeBalance, TrainBalance float64 // max / mean

	// The read estimate, when computed: its fanouts and batch size, and
	// the shares over all partitions (weighted by their reads).
	ReadFanouts []int
	ReadBatch   int
	Reads       ReadShares
}

// PartReport describes one partition file.
type PartReport struct {
	Part             int
	Path             string // slash path inside the directory
	Nodes, Edges     uint64
	FeatBytes        uint64
	Train, Val, Test uint64
	DegMin, DegMax   uint64
	DegP50, DegP99   uint64
	DegMean          float64
	Cut              uint64 // stored edges whose neighbour is owned by another partition
	Cache            uint64 // cached nodes owned elsewhere
	Reads            ReadShares
	// Recorded, with Verify, is graph.toml's estimate of the part's read
	// shares where it differs from Reads: another build's estimate,
	// reported, no failure.
	Recorded *ReadShares
	Sections []csr.Section
	Err      error // the file could not be opened or disagrees with graph.toml
}

// FileCheck is the verification of one file.
type FileCheck struct {
	Path string
	Err  error // nil: OK
}

// OK reports whether every partition opened and every check passed.
func (r *Report) OK() bool {
	for _, p := range r.Parts {
		if p.Err != nil {
			return false
		}
	}
	for _, f := range r.Files {
		if f.Err != nil {
			return false
		}
	}
	return true
}

// Inspect opens the manifest and every partition of dir and computes the
// report. A manifest that does not validate is an error; a partition
// that fails to open or verify is recorded in the report (see OK).
func Inspect(ctx context.Context, dir string, opts InspectOptions) (*Report, error) {
	var m *Manifest
	var err error
	if opts.Part != nil {
		if m, err = OpenManifest(dir); err == nil && (*opts.Part < 0 || *opts.Part >= m.Parts) {
			err = fmt.Errorf("partition: part %d: %s holds parts 0..%d", *opts.Part, dir, m.Parts-1)
		}
		if err == nil {
			m, err = OpenPart(dir, *opts.Part)
		}
	} else if opts.Verify {
		// Each file is checked below and reported on its own: OpenDir's
		// check of every file's size stopped at a truncated part, and
		// the others went unreported.
		m, err = OpenManifest(dir)
	} else {
		m, err = OpenDir(dir)
	}
	if err != nil {
		return nil, err
	}
	parts := make([]int, 0, m.Parts)
	for p := range m.Parts {
		if opts.Part == nil || p == *opts.Part {
			parts = append(parts, p)
		}
	}
	r := &Report{Dir: dir, Manifest: m, OnePart: opts.Part != nil}
	for _, p := range parts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r.Parts = append(r.Parts, inspectPart(dir, m, p, opts.Verify))
	}
	if opts.Verify {
		if r.Unlisted, err = unlisted(dir, m); err != nil {
			return nil, err
		}
		for _, f := range m.File {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if opts.Part == nil || f.Path == PartFile(*opts.Part) || EvalTriples(f.Path) {
				r.Files = append(r.Files, verifyFile(dir, f, r.Parts))
			}
		}
	}
	fanouts, batch := opts.Fanouts, opts.BatchSize
	if fanouts == nil {
		fanouts, batch = m.Fanouts, m.BatchSize
	}
	if fanouts != nil && m.Train > 0 && r.OK() && !r.OnePart {
		hopts := HeatOptions{Fanouts: fanouts, BatchSize: batch}
		shares, err := inspectReads(ctx, dir, m, hopts)
		if err != nil {
			return nil, err
		}
		r.ReadFanouts, r.ReadBatch = fanouts, batch
		same := slices.Equal(fanouts, m.Fanouts) && batch == m.BatchSize
		for p, s := range shares {
			pr := &r.Parts[p]
			pr.Reads = s
			if e := m.Part[p]; same && opts.Verify && sharesDiffer(s, e) {
				// Another build's estimate: graph.toml's checksum says
				// the shares are what the build that wrote the files
				// estimated, so they are reported, and fail nothing
				// (every change of the estimate failed the directories
				// written before it).
				pr.Recorded = &ReadShares{Local: e.ReadsLocal, Cached: e.ReadsCached, Remote: e.ReadsRemote}
			}
		}
		r.Reads = TotalShares(shares)
	}
	r.totals()
	return r, nil
}

// sharesDiffer reports whether estimated shares are further than
// shareCheck from those graph.toml records for the part: the build that
// wrote them estimated otherwise.
func sharesDiffer(s ReadShares, e PartEntry) bool {
	return math.Abs(s.Local-e.ReadsLocal) > shareCheck || math.Abs(s.Cached-e.ReadsCached) > shareCheck
}

// shareCheck is how far the read shares recomputed from the files may be
// from graph.toml's with the same estimate: summation order differs,
// nothing else.
const shareCheck = 1e-3

// inspectReads estimates every partition's read shares from the files as
// written: the union of the part files' rows, its trainer's share of the
// training masks as its seeds (TrainerSeeds), its cache_ids as its cache.
func inspectReads(ctx context.Context, dir string, m *Manifest, opts HeatOptions) ([]ReadShares, error) {
	if m.Nodes > math.MaxUint32 {
		return nil, fmt.Errorf("partition: %s: %d nodes: the read estimate handles at most 2^32", dir, m.Nodes)
	}
	graphs := make([]*csr.Graph, m.Parts)
	defer func() {
		for _, g := range graphs {
			if g != nil {
				g.Close()
			}
		}
	}()
	for p := range graphs {
		g, err := csr.Open(filepath.Join(dir, filepath.FromSlash(PartFile(p))), csr.OpenOptions{})
		if err != nil {
			return nil, err
		}
		graphs[p] = g
	}
	return partsReads(ctx, dir, m, graphs, opts)
}

// partsReads is inspectReads of the parts' open files. Their mappings are
// read through csr.Graph.Read: a file truncated or rewritten in place
// while they are read (a copy into the directory under way) is an error
// that names it, not a SIGBUS that ends the process.
func partsReads(ctx context.Context, dir string, m *Manifest, graphs []*csr.Graph, opts HeatOptions) ([]ReadShares, error) {
	n := int(m.Nodes)
	blocks := make([]heatRows[uint64], m.Parts)
	seeds := make([][]uint32, m.Parts)
	cache := make([][]uint32, m.Parts)
	owner := make([]uint32, n)
	var t *transpose
	err := readMapped(graphs, func() error {
		for p, g := range graphs {
			start := g.Meta().Start
			blocks[p] = heatRows[uint64]{start: uint32(start), indptr: g.Indptr(), indices: g.Indices()}
			mask, err := g.Mask(csr.SecTrain)
			if err != nil {
				return err
			}
			if mask != nil {
				for it := mask.Iterator(); it.HasNext(); {
					seeds[p] = append(seeds[p], uint32(start)+it.Next())
				}
			}
			for _, id := range g.CacheIDs() {
				cache[p] = append(cache[p], uint32(id))
			}
			for v := start; v < g.Meta().End; v++ {
				owner[v] = uint32(p)
			}
		}
		var err error
		if t, err = buildTranspose(ctx, n, blocks); err != nil {
			return fmt.Errorf("partition: %s: %w", dir, err)
		}
		return nil // the transpose holds what the estimate reads of the files
	})
	if err != nil {
		return nil, err
	}
	// The parts' masks in part order are the training nodes in ascending
	// global id order.
	seeds = TrainerSeeds(slices.Concat(seeds...), m.Parts)
	heat, err := t.heat(ctx, seeds, opts)
	if err != nil {
		return nil, err
	}
	return EstimateShares(heat, owner, cache), nil
}

// inspectPart opens partition p and measures it.
func inspectPart(dir string, m *Manifest, p int, verify bool) PartReport {
	rel := PartFile(p)
	pr := PartReport{Part: p, Path: rel}
	g, err := csr.Open(filepath.Join(dir, filepath.FromSlash(rel)), csr.OpenOptions{Verify: verify})
	if err != nil {
		pr.Err = err
		return pr
	}
	defer g.Close()
	measurePart(&pr, g, m, p)
	return pr
}

// measurePart fills pr from g, part p of m. It reads the mapping through
// csr.Graph.Read: a file truncated or rewritten in place meanwhile (a copy
// into the directory under way) is pr.Err naming it, not a SIGBUS that
// ends the process.
func measurePart(pr *PartReport, g *csr.Graph, m *Manifest, p int) {
	if err := g.Read(func() error { measure(pr, g, m, p); return nil }); err != nil {
		pr.Err = err
	}
}

// measure is measurePart's reads of the mapping.
func measure(pr *PartReport, g *csr.Graph, m *Manifest, p int) {
	rel := pr.Path
	meta, e := g.Meta(), m.Part[p]
	if meta.Part != uint32(p) || meta.NumParts != uint32(m.Parts) || meta.Start != e.Start || meta.End != e.End || meta.TotalNodes != m.Nodes {
		pr.Err = fmt.Errorf("partition: %s: header says part %d of %d owning [%d, %d) of %d nodes; graph.toml says part %d of %d owning [%d, %d) of %d: %w",
			rel, meta.Part, meta.NumParts, meta.Start, meta.End, meta.TotalNodes, p, m.Parts, e.Start, e.End, m.Nodes, ErrManifest)
	}
	pr.Nodes, pr.Edges = uint64(g.NumNodes()), uint64(g.NumEdges())
	if pr.Err == nil && pr.Edges != e.Edges {
		pr.Err = fmt.Errorf("partition: %s: %d edges, graph.toml key \"part[%d].edges\" says %d: %w", rel, pr.Edges, p, e.Edges, ErrManifest)
	}
	pr.FeatBytes = uint64(len(g.FeatBytes()))
	pr.Cache = uint64(len(g.CacheIDs()))
	if pr.Err == nil && pr.Cache != e.Cache {
		pr.Err = fmt.Errorf("partition: %s: %d cached nodes, graph.toml key \"part[%d].cache\" says %d: %w", rel, pr.Cache, p, e.Cache, ErrManifest)
	}
	pr.Sections = g.Sections()
	counts := []*uint64{&pr.Train, &pr.Val, &pr.Test}
	for i, name := range []string{csr.SecTrain, csr.SecVal, csr.SecTest} {
		b, err := g.Mask(name)
		if err != nil {
			pr.Err = err
			return
		}
		*counts[i] = b.GetCardinality()
	}
	indptr := g.Indptr()
	deg := make([]uint64, g.NumNodes())
	for v := range deg {
		deg[v] = indptr[v+1] - indptr[v]
	}
	if len(deg) > 0 {
		slices.Sort(deg)
		pr.DegMin, pr.DegMax = deg[0], deg[len(deg)-1]
		if pr.Err == nil && e.MaxDegree != 0 && e.MaxDegree != pr.DegMax {
			pr.Err = fmt.Errorf("partition: %s: largest degree %d, graph.toml key \"part[%d].max_degree\" says %d: %w", rel, pr.DegMax, p, e.MaxDegree, ErrManifest)
		}
		pr.DegP50, pr.DegP99 = deg[(len(deg)-1)*50/100], deg[(len(deg)-1)*99/100]
		pr.DegMean = float64(pr.Edges) / float64(len(deg))
	}
	for _, id := range g.Indices() {
		if id < meta.Start || id >= meta.End {
			pr.Cut++
		}
	}
}

// readMapped runs f, which reads the mappings of graphs, through each one's
// csr.Graph.Read: a fault on any of them is that file's change (a Read
// passes on a fault outside its own mapping to the Read around it).
func readMapped(graphs []*csr.Graph, f func() error) error {
	if len(graphs) == 0 {
		return f()
	}
	return graphs[0].Read(func() error { return readMapped(graphs[1:], f) })
}

// verifyFile checks one file's size and CRC-32C against graph.toml; a
// part file that failed to open fails here too.
func verifyFile(dir string, f FileEntry, parts []PartReport) FileCheck {
	fc := FileCheck{Path: f.Path}
	for _, p := range parts {
		if p.Path == f.Path && p.Err != nil {
			fc.Err = p.Err
			return fc
		}
	}
	size, crc, err := FileCRC(filepath.Join(dir, filepath.FromSlash(f.Path)))
	switch {
	case err != nil:
		fc.Err = err
	case size != f.Size:
		fc.Err = fmt.Errorf("partition: %s: %d bytes, graph.toml records %d: %w", f.Path, size, f.Size, ErrManifest)
	case fmt.Sprintf("%08x", crc) != f.CRC32C:
		fc.Err = fmt.Errorf("partition: %s: crc32c %08x, graph.toml records %s: %w", f.Path, crc, f.CRC32C, csr.ErrCorrupt)
	}
	return fc
}

// unlistedShown is how many of Report.Unlisted Format names; the rest
// it counts.
const unlistedShown = 20

// unlisted walks dir for the entries that are neither graph.toml, nor a
// file graph.toml lists, nor a directory on the way to one. A directory
// that leads to no listed file is one entry and is not entered; links
// inside dir are not followed (a listed path may be a link).
func unlisted(dir string, m *Manifest) ([]string, error) {
	lead := map[string]bool{}
	for _, f := range m.File {
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			lead[d] = true
		}
	}
	var out []string
	// The walk does not follow links, the directory's own included
	// (a parts/ linked to a larger disk).
	root, err := filepath.EvalSymlinks(dir)
	if err == nil {
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, p)
			if err != nil || rel == "." {
				return err
			}
			rel = filepath.ToSlash(rel)
			switch {
			case rel == ManifestFile || m.Lookup(rel) != nil:
				return nil
			case lead[rel]:
				return nil // a directory is entered, a link is not
			case d.IsDir():
				out = append(out, rel+"/")
				return filepath.SkipDir
			}
			out = append(out, rel)
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("partition: %s: listing the directory: %w", dir, err)
	}
	return out, nil
}
