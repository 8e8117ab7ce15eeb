package main

// node kge's input: the partitioning's triples (this trainer's part's, and
// those an evaluation filters by), read and checked against graph.toml.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"

	"graphnode/csr"
	"graphnode/partition"
	"graphnode/train"
)

// kgeInput is what the trainer reads from the partition directory.
type kgeInput struct {
	m    *partition.Manifest
	part int
	// client: the node is a client node, which holds no shard (and so
	// cannot say whether a table's rows were trained).
	client bool
	train  []train.Triple
	eval   []train.Triple
	filter *train.KGEFilter
	orig   []uint64 // new id -> input entity id, for --export
	export []string // --export's files (kgeExportFiles)
}

// load checks the node against the partition directory and reads the
// part's triples, the evaluation triples and the filter.
func (f *kgeFlags) load(ctx context.Context) (*kgeInput, error) {
	st, err := waitReady(ctx, f.socket, kgeReadyTimeout)
	if err != nil {
		return nil, err
	}
	if f.save {
		if err := checkSave(st, f.socket); err != nil {
			return nil, err
		}
	}
	in := &kgeInput{part: f.part, client: st.Part < 0}
	switch {
	case in.part < 0 && st.Part < 0:
		return nil, fmt.Errorf("the node at %s is a client node (no part): pass --part", f.socket)
	case in.part < 0:
		in.part = st.Part
	case st.Part >= 0 && st.Part != in.part:
		return nil, fmt.Errorf("--part %d, but the node at %s serves part %d: train on the part of this host", in.part, f.socket, st.Part)
	}
	if in.m, err = partition.OpenPart(f.parts, in.part); err != nil {
		return nil, err
	}
	m := in.m
	// A node without a mesh (one part) says its checksum only at the top
	// of its stats; one of an earlier build only in its mesh's.
	served := st.Checksum
	if served == "" && st.Mesh != nil {
		served = st.Mesh.Checksum
	}
	if served != "" && served != m.Checksum {
		return nil, fmt.Errorf("%s has checksum %s, the node at %s serves %s: not the same partitioning", f.parts, m.Checksum, f.socket, served)
	}
	if err := checkKGEManifest(f.parts, m); err != nil {
		return nil, err
	}
	if f.cfg.World != m.Parts {
		// Each trainer trains the triples its part stores: fewer trainers
		// would leave parts untrained, more would train a part twice.
		return nil, fmt.Errorf("--world-size %d, but %s has %d parts: run one trainer per part (rank r on the host of part r)", f.cfg.World, f.parts, m.Parts)
	}
	if f.cfg.Rank != in.part {
		// With distinct ranks (the first all-reduce refuses a rank twice)
		// every part is then trained once.
		return nil, fmt.Errorf("--rank %d trains part %d: run rank r on the host of part r", f.cfg.Rank, in.part)
	}
	if err := f.checkEvalMemory(m); err != nil {
		return nil, badFlags(err)
	}
	if f.export != "" && f.cfg.Rank == 0 {
		// Checked before training, not after it.
		if in.orig, err = partition.ReadOrigIDs(f.parts, m); err != nil {
			return nil, fmt.Errorf("--export maps rows back to the input's entity ids: %w", err)
		}
		if err := checkOrigIDs(in.orig); err != nil {
			return nil, fmt.Errorf("--export: %s: %w", f.parts, err)
		}
		if in.export, err = kgeExportFiles(m.Name, f.cfg.Model); err != nil {
			return nil, fmt.Errorf("--export %s: %w", f.export, err)
		}
		if err := prepareKGEExport(f.export, in.export); err != nil {
			return nil, fmt.Errorf("--export %s: %w", f.export, err)
		}
	}
	if in.train, err = readPartTriples(f.parts, m, in.part); err != nil {
		return nil, err
	}
	if err := checkPartTriples(len(in.train), f.cfg.Epochs, in.part, f.parts); err != nil {
		return nil, err
	}
	var evalFile string
	switch f.eval {
	case "test":
		evalFile = partition.TriplesTestFile
	case "valid":
		evalFile = partition.TriplesValidFile
	case "none":
		return in, nil
	default:
		return nil, fmt.Errorf("--eval %q: want test, valid or none", f.eval)
	}
	ev, err := partition.ReadTriples(f.parts, m, evalFile)
	if errors.Is(err, fs.ErrNotExist) {
		// node fetch, without --all, brings graph.toml and the part only.
		return nil, fmt.Errorf("--eval %s reads %s, which %s lacks: node fetch -c node.toml brings it, or pass --eval none: %w", f.eval, evalFile, f.parts, err)
	}
	if err != nil {
		return nil, err
	}
	if ev.Len() == 0 {
		return nil, fmt.Errorf("%s holds no %s triples: pass --eval with another split or none", f.parts, f.eval)
	}
	in.eval = kgeTriples(ev)
	if f.filter {
		// Before the sample is drawn: every triple of the split is known.
		if in.filter, err = kgeFilter(f.parts, m, in.part, in.train, evalFile, in.eval); err != nil {
			return nil, err
		}
	}
	if f.evalSample > 0 && f.evalSample < len(in.eval) {
		// The same sample on every trainer: drawn from the job's seed.
		rng := rand.New(rand.NewPCG(f.cfg.Seed, 0x65766c))
		rng.Shuffle(len(in.eval), func(i, j int) { in.eval[i], in.eval[j] = in.eval[j], in.eval[i] })
		in.eval = in.eval[:f.evalSample]
	}
	return in, nil
}

// checkKGEManifest refuses a partitioning whose stored edges are not the
// knowledge graph's triples, each once, with its head: node kge reads
// every stored edge (h, r, t) as a training triple.
func checkKGEManifest(dir string, m *partition.Manifest) error {
	if m.Relations == 0 {
		return fmt.Errorf("%s: no relations: not a knowledge graph (partition it with --format kg)", dir)
	}
	if m.Direction != "out" {
		return fmt.Errorf("%s: edges are stored with their %s endpoint; knowledge graphs are stored with their head (partition with --direction out, the default of --format kg)", dir, m.Direction)
	}
	if m.Undirected {
		// A reverse edge keeps its relation: (t, r, h) is no fact of the
		// graph, and training on it teaches every relation to be symmetric.
		return fmt.Errorf("%s: %s has undirected = true: the reverse edges added by --undirected would be read as triples (t, r, h) the graph does not hold; partition the knowledge graph again without --undirected", dir, partition.ManifestFile)
	}
	return nil
}

// kgeFilter indexes every known fact: the triples of every part, valid
// and test. Part own's triples and the split in evalFile are already
// read (ownTriples, evalTriples); every other part file must be here.
func kgeFilter(dir string, m *partition.Manifest, own int, ownTriples []train.Triple, evalFile string, evalTriples []train.Triple) (*train.KGEFilter, error) {
	if _, err := partition.OpenDir(dir); err != nil {
		return nil, fmt.Errorf("filtered evaluation reads every part's triples: %w (node fetch --all -c node.toml brings every file of the set to this host, or pass --eval-filter=false for raw ranks)", err)
	}
	sets := [][]train.Triple{ownTriples, evalTriples}
	for p := range m.Parts {
		if p == own {
			continue
		}
		ts, err := readPartTriples(dir, m, p)
		if err != nil {
			return nil, err
		}
		sets = append(sets, ts)
	}
	for _, file := range []string{partition.TriplesValidFile, partition.TriplesTestFile} {
		if file == evalFile {
			continue
		}
		ts, err := partition.ReadTriples(dir, m, file)
		if err != nil {
			return nil, err
		}
		sets = append(sets, kgeTriples(ts))
	}
	return train.NewKGEFilter(sets...), nil
}

// readPartTriples reads the training triples part p stores: its rows are
// heads (the part's own entities), the edges' targets tails, the etype
// section relations.
func readPartTriples(dir string, m *partition.Manifest, p int) ([]train.Triple, error) {
	path := filepath.Join(dir, filepath.FromSlash(partition.PartFile(p)))
	g, err := csr.Open(path, csr.OpenOptions{})
	if err != nil {
		return nil, err
	}
	defer g.Close()
	return partTriples(g, path, m, p)
}

// partTriples is readPartTriples of the open file g at path. It reads
// the mapping through csr.Graph.Read: a part file truncated or rewritten
// in place meanwhile (another copy of the parts arriving) is an error
// naming it, not a SIGBUS that ends the trainer.
func partTriples(g *csr.Graph, path string, m *partition.Manifest, p int) (out []train.Triple, err error) {
	et := g.Etypes()
	if et == nil {
		return nil, fmt.Errorf("%s: no etype section: not a knowledge graph (partition it with --format kg)", path)
	}
	start := m.Part[p].Start
	err = g.Read(func() error {
		ip, idx := g.Indptr(), g.Indices()
		out = make([]train.Triple, 0, len(idx))
		for v := range g.NumNodes() {
			for e := ip[v]; e < ip[v+1]; e++ {
				if int(et[e]) >= m.Relations {
					return fmt.Errorf("%s: edge %d has relation %d of %d: %w", path, e, et[e], m.Relations, csr.ErrCorrupt)
				}
				out = append(out, train.Triple{Head: start + uint64(v), Rel: et[e], Tail: idx[e]})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func kgeTriples(t partition.Triples) []train.Triple {
	out := make([]train.Triple, t.Len())
	for i := range out {
		out[i] = train.Triple{Head: uint64(t.Head[i]), Rel: t.Rel[i], Tail: uint64(t.Tail[i])}
	}
	return out
}
