package partition

// One edge of an edge list: integer ids, read fast where a line is two
// plain numbers, or names, mapped to ids as they come.

import ()

// edge adds the edge of one split line.
func (r *edgeList) edge(s *lineScanner, f *[edgeSplit][]byte) error {
	g := r.g
	g.Stats.Lines++
	var w float32
	if r.opts.Weighted {
		var ok bool
		if w, ok = parseFloat32(f[2]); !ok {
			return s.errorf("weight %q is not a number", f[2])
		}
		if !finite32(w) {
			return s.errorf("weight %q is not a finite number", f[2])
		}
	}
	if !r.strs {
		x, okx := r.intID(f[0])
		y, oky := r.intID(f[1])
		if !okx || !oky {
			bad := f[0]
			if okx {
				bad = f[1]
			}
			if r.decided {
				return s.errorf("node id %q is not an integer", bad)
			}
			r.toStrings()
			return r.edgeNames(s, f, w)
		}
		return r.intEdge(s, x, y, w)
	}
	return r.edgeNames(s, f, w)
}

// intEdge adds the edge x -> y of integer ids.
func (r *edgeList) intEdge(s *lineScanner, x, y uint64, w float32) error {
	g := r.g
	g.Stats.EdgesRead++
	if r.known != nil {
		keep, err := r.knownInts(s, x, y)
		if !keep {
			return err
		}
	}
	if !r.wide && (x > maxNarrowID || y > maxNarrowID) {
		r.goWide()
	}
	var a, b uint32
	if r.wide {
		a, b = r.wideIndex(x), r.wideIndex(y)
	} else {
		a, b = uint32(x), uint32(y)
		r.maxID = max(r.maxID, x, y)
	}
	r.add(a, b, w)
	return nil
}

// fastPair parses the most common line, "digits sep digits" with sep a
// run of blanks or one comma among blanks, in one pass; any other line
// (comments, weights, strings, errors) takes the general path.
func fastPair(line []byte) (a, b uint64, ok bool) {
	i := 0
	for i < len(line) && line[i]-'0' <= 9 {
		a = a*10 + uint64(line[i]-'0')
		i++
	}
	// A leading zero leaves the line to edge, which decides what it
	// means (intID).
	if i == 0 || i > 19 || (line[0] == '0' && i > 1) {
		return 0, 0, false
	}
	j, commas := i, 0
	for j < len(line) && (line[j] == ' ' || line[j] == '\t' || line[j] == ',') {
		if line[j] == ',' {
			commas++
		}
		j++
	}
	k := j
	for k < len(line) && line[k]-'0' <= 9 {
		b = b*10 + uint64(line[k]-'0')
		k++
	}
	if j == i || commas > 1 || k == j || k-j > 19 || k != len(line) || (line[j] == '0' && k-j > 1) {
		return 0, 0, false
	}
	return a, b, true
}

// knownInts applies the dangling policy to an edge of integer ids when a
// node file defines the node set.
func (r *edgeList) knownInts(s *lineScanner, x, y uint64) (bool, error) {
	if r.known.has(x) && r.known.has(y) {
		return true, nil
	}
	r.g.Stats.Dangling++
	switch r.opts.Dangling {
	case Add:
		r.known.add(x)
		r.known.add(y)
		return true, nil
	case Error:
		bad := x
		if r.known.has(x) {
			bad = y
		}
		return false, s.errorf("node %d is not in the node file %s", bad, r.opts.NodeFile)
	}
	r.g.Stats.DanglingDrop++
	return false, nil
}

// edgeNames adds an edge of string ids.
func (r *edgeList) edgeNames(s *lineScanner, f *[edgeSplit][]byte, w float32) error {
	g := r.g
	g.Stats.EdgesRead++
	var a, b uint32
	if r.knownNames {
		var oka, okb bool
		a, oka = r.names.lookup(f[0])
		b, okb = r.names.lookup(f[1])
		if !oka || !okb {
			g.Stats.Dangling++
			switch r.opts.Dangling {
			case Add:
				if err := edgeNameFault(s, f); err != nil {
					return err
				}
				a, b = r.names.intern(f[0]), r.names.intern(f[1])
			case Error:
				bad := f[0]
				if oka {
					bad = f[1]
				}
				return s.errorf("node %q is not in the node file %s", bad, r.opts.NodeFile)
			default:
				g.Stats.DanglingDrop++
				return nil
			}
		}
	} else {
		if err := edgeNameFault(s, f); err != nil {
			return err
		}
		a, b = r.names.intern(f[0]), r.names.intern(f[1])
	}
	r.add(a, b, w)
	return nil
}

// edgeNameFault refuses an edge whose string ids names.txt cannot hold.
func edgeNameFault(s *lineScanner, f *[edgeSplit][]byte) error {
	for _, id := range f[:2] {
		if msg := nameFault("node id", NamesFile, id); msg != "" {
			return s.errorf("%s", msg)
		}
	}
	return nil
}

// add appends edge a -> b (and its weight when the list is weighted),
// counting a self loop.
func (r *edgeList) add(a, b uint32, w float32) {
	g := r.g
	if a == b {
		g.Stats.SelfLoops++
	}
	g.Src = append(g.Src, a)
	g.Dst = append(g.Dst, b)
	if r.opts.Weighted {
		g.Weights = append(g.Weights, w)
	}
}
