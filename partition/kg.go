package partition

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// A knowledge graph in the layout of DGL-KE and KnowledgeGraphEmbedding
// (FB15k, FB15k-237, WN18, WN18RR) is a directory of TAB-separated files:
//
//	entities.dict    id \t name     ids contiguous from 0
//	relations.dict   id \t name
//	train.txt        head \t relation \t tail   (names, not ids)
//	valid.txt        same, optional
//	test.txt         same, optional
//
// Node i is entity id i (IDs.Names[i] is its name); the training triples
// become edges head -> tail with Etypes = relation; validation and test
// triples go to Graph.KG. A triple naming an unknown entity or relation is
// an error naming file and line; a valid or test triple that repeats one
// before it in its file is dropped, kept or refused (ReadOptions.
// EvalRepeats) and counted in Stats.EvalRepeats. CRLF line ends (FB15k-237) are accepted,
// and each file may be gzip-compressed (same name or name.gz).
//
// A directory without both dictionaries (DGL-KE's raw_udd_hrt layout)
// numbers entities and relations by first appearance, as DGL-KE does:
// over train, valid and test in that order, a line's head before its
// tail. One dictionary without the other is refused.
func readKG(ctx context.Context, dir string, opts ReadOptions) (*Graph, error) {
	ents, rels, err := kgDicts(ctx, dir, opts.Progress)
	if err != nil {
		return nil, err
	}
	g := &Graph{}
	kg := kgReader{ctx: ctx, opts: opts, ents: ents, rels: rels, byAppearance: ents == nil}
	if kg.byAppearance {
		kg.ents, kg.rels = newNameIDs(0), newNameIDs(0)
	}

	train, err := existing(filepath.Join(dir, "train.txt"))
	if err != nil {
		return nil, err
	}
	var t Triples
	if err := kg.triples(train, &t, &g.Stats, nil); err != nil {
		return nil, err
	}
	if len(t.Head) == 0 {
		// The parts were written with no edge type section, and node kge
		// then said they were not partitioned with --format kg.
		return nil, formatErrorf("%s: no training triples", train)
	}
	g.Src, g.Etypes, g.Dst = t.Head, t.Rel, t.Tail
	g.KG = &KG{}
	for _, part := range []struct {
		name string
		to   *Triples
	}{{"valid.txt", &g.KG.Valid}, {"test.txt", &g.KG.Test}} {
		path, err := existing(filepath.Join(dir, part.name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := kg.triples(path, part.to, nil, &g.Stats.EvalRepeats); err != nil {
			return nil, err
		}
	}
	// After valid and test, which number what they name first.
	g.NumNodes, g.IDs = len(kg.ents.names), IDMap{Names: kg.ents.names}
	g.KG.RelationNames = kg.rels.names
	return g, nil
}

// kgDicts reads dir's entities.dict and relations.dict, or returns nil
// for both when it has neither.
func kgDicts(ctx context.Context, dir string, progress Progress) (ents, rels *nameIDs, err error) {
	names := []string{"entities.dict", "relations.dict"}
	var missing []string
	for _, name := range names {
		if _, err := existing(filepath.Join(dir, name)); errors.Is(err, os.ErrNotExist) {
			missing = append(missing, name)
		} else if err != nil {
			return nil, nil, err
		}
	}
	switch len(missing) {
	case 2:
		return nil, nil, nil
	case 1:
		other := names[0]
		if other == missing[0] {
			other = names[1]
		}
		return nil, nil, formatErrorf("%s: %s without %s: give both dictionaries (id TAB name a line: the ids of entities and relations) or neither (then numbered by first appearance over train, valid and test, as DGL-KE's raw_udd formats)",
			dir, other, missing[0])
	}
	if ents, err = readDict(ctx, filepath.Join(dir, names[0]), "entity", NamesFile, progress); err != nil {
		return nil, nil, err
	}
	if rels, err = readDict(ctx, filepath.Join(dir, names[1]), "relation", RelationsFile, progress); err != nil {
		return nil, nil, err
	}
	return ents, rels, nil
}

type kgReader struct {
	ctx          context.Context
	opts         ReadOptions
	ents, rels   *nameIDs
	byAppearance bool // no dictionaries: a new name takes the next id
}

// id is name's id in t, which holds the names of what and is written to
// the name file to: the dictionary's, or without dictionaries the next
// free one when name is new. msg says why there is none.
func (k *kgReader) id(t *nameIDs, what, to string, name []byte) (id uint32, msg string) {
	if i, ok := t.lookup(name); ok {
		return i, ""
	}
	if !k.byAppearance {
		return 0, fmt.Sprintf("unknown %s %q", what, name)
	}
	if msg := nameFault(what+" name", to, name); msg != "" {
		return 0, msg
	}
	if len(t.names) > maxNarrowID { // the count must fit in uint32 too
		return 0, fmt.Sprintf("%s %q: more than %d names", what, name, maxNarrowID+1)
	}
	return t.add(string(name)), ""
}

// readDict reads "id \t name" lines; the ids must be 0..n-1 (in any order)
// and the names distinct. Its memory follows the file, not the ids the
// file states: names are mapped to their ids as read, and placed by id
// once their count is known, so that a stray id of four billion is an error naming its
// line, not 64 GB of empty names. The names, of an entity or a relation
// (what), are written to the name file to, one a line.
func readDict(ctx context.Context, name, what, to string, progress Progress) (*nameIDs, error) {
	path, err := existing(name)
	if err != nil {
		return nil, err
	}
	type entry struct {
		id   uint32
		line int64
		name string
	}
	var ents []entry
	d := newNameIDs(0)
	fields := make([][]byte, 0, 4)
	err = scanFile(ctx, path, progress, func(s *lineScanner, line []byte) error {
		if len(line) == 0 {
			return nil
		}
		if fields = splitTabs(line, fields[:0]); len(fields) != 2 {
			return s.errorf("want 2 fields (id, name), got %d", len(fields))
		}
		id, ok := parseUint(fields[0])
		if !ok || id >= 1<<32-1 {
			return s.errorf("id %q is not a node index", fields[0])
		}
		if _, dup := d.m[string(fields[1])]; dup {
			return s.errorf("name %q listed twice", fields[1])
		}
		if msg := nameFault(what+" name", to, fields[1]); msg != "" {
			return s.errorf("%s", msg)
		}
		e := entry{id: uint32(id), line: s.line, name: string(fields[1])}
		d.m[e.name] = e.id
		ents = append(ents, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	n := len(ents)
	d.names = make([]string, n)
	set := make([]bool, n)
	var outside *entry // the first entry whose id is not below n
	for i := range ents {
		e := &ents[i]
		if int(e.id) >= n {
			if outside == nil {
				outside = e
			}
			continue
		}
		if set[e.id] {
			return nil, &LineError{File: path, Line: e.line, Msg: fmt.Sprintf("id %d listed twice", e.id)}
		}
		set[e.id] = true
		d.names[e.id] = e.name
	}
	for id, ok := range set {
		if !ok {
			// n entries, none twice: some id is missing exactly when
			// one lies outside 0..n-1.
			return nil, formatErrorf("%s: ids are not contiguous: %d is missing (line %d has id %d; %d entries hold ids 0..%d)",
				path, id, outside.line, outside.id, n, n-1)
		}
	}
	return d, nil
}

// triples reads "head \t relation \t tail" lines into t; stats, when not
// nil, counts them as edges. With repeats not nil (evaluation triples), a
// triple that repeats one before it is dropped, kept or refused by
// k.opts.EvalRepeats and counted there.
func (k *kgReader) triples(path string, t *Triples, stats *Stats, repeats *int64) error {
	fields := make([][]byte, 0, 4)
	first := true
	seen := make(map[[3]uint32]int64) // a triple's first line, with repeats
	policy := k.opts.EvalRepeats
	if policy == "" {
		policy = Drop
	}
	return scanFile(k.ctx, path, k.opts.Progress, func(s *lineScanner, line []byte) error {
		if len(line) == 0 {
			return nil
		}
		if first {
			first = false
			n := estimateRows(s, line)
			t.Head, t.Rel, t.Tail = make([]uint32, 0, n), make([]uint32, 0, n), make([]uint32, 0, n)
		}
		if fields = splitTabs(line, fields[:0]); len(fields) != 3 {
			return s.errorf("want 3 fields (head, relation, tail), got %d", len(fields))
		}
		// Head, tail, relation: DGL-KE's order of first appearance.
		h, msg := k.id(k.ents, "entity", NamesFile, fields[0])
		if msg != "" {
			return s.errorf("%s", msg)
		}
		tl, msg := k.id(k.ents, "entity", NamesFile, fields[2])
		if msg != "" {
			return s.errorf("%s", msg)
		}
		r, msg := k.id(k.rels, "relation", RelationsFile, fields[1])
		if msg != "" {
			return s.errorf("%s", msg)
		}
		if repeats != nil {
			key := [3]uint32{h, r, tl}
			if at, ok := seen[key]; ok {
				if policy == Error {
					return s.errorf("triple (%s, %s, %s) repeats line %d: it would count twice in MRR and Hits@k (--duplicates drop drops it)", fields[0], fields[1], fields[2], at)
				}
				*repeats++
				if policy == Drop {
					return nil
				}
			} else {
				seen[key] = s.line
			}
		}
		t.Head, t.Rel, t.Tail = append(t.Head, h), append(t.Rel, r), append(t.Tail, tl)
		if stats != nil {
			stats.Lines++
			stats.EdgesRead++
			if h == tl {
				stats.SelfLoops++
			}
		}
		return nil
	})
}
