package partition

import (
	"math"
	"math/bits"
	"slices"
	"strconv"
)

// idSet is a set of integer node ids: a bitmap while the ids are small
// enough for one (dense inputs, the common case, never hash), a map when
// they are sparse.
type idSet struct {
	bits []uint64            // bit id%64 of word id/64; nil in map mode
	m    map[uint64]struct{} // map mode
	n    int                 // members
	max  uint64              // largest member
}

// A bitmap (1 bit per possible id, plus 4 bytes of rank per 64 ids when
// the index is built) is used while it costs at most bitmapBase bytes
// plus 16 per member: any id below 2^32 for a graph of 100M edges, a
// map only for few nodes with huge ids.
const bitmapBase = 128 << 20

func fitsBitmap(id uint64, n int) bool {
	return id/8*3/2 <= bitmapBase+16*uint64(n)
}

// newIDSet returns a set presized for ids up to max and about n members.
func newIDSet(max uint64, n int) *idSet {
	if fitsBitmap(max, n) {
		return &idSet{bits: make([]uint64, max/64+1)}
	}
	return &idSet{m: make(map[uint64]struct{}, n)}
}

// add inserts id and reports whether it was new.
func (s *idSet) add(id uint64) bool {
	if s.m == nil && id/64 >= uint64(len(s.bits)) {
		if !fitsBitmap(id, s.n) {
			s.toMap()
		} else {
			s.bits = slices.Grow(s.bits, int(id/64)+1-len(s.bits))
			s.bits = s.bits[:cap(s.bits)]
		}
	}
	if s.m != nil {
		if _, ok := s.m[id]; ok {
			return false
		}
		s.m[id] = struct{}{}
	} else {
		w, b := id/64, id%64
		if s.bits[w]&(1<<b) != 0 {
			return false
		}
		s.bits[w] |= 1 << b
	}
	s.n++
	s.max = max(s.max, id)
	return true
}

// addAll adds the ids of ends, all at most max, to an empty set.
func (s *idSet) addAll(max uint64, ends ...[]uint32) {
	if s.m != nil || s.n != 0 || uint64(len(s.bits)) <= max/64 {
		for _, e := range ends {
			for _, id := range e {
				s.add(uint64(id))
			}
		}
		return
	}
	b := s.bits
	for _, e := range ends {
		for _, id := range e {
			b[id>>6] |= 1 << (id & 63)
		}
	}
	for _, w := range b {
		s.n += bits.OnesCount64(w)
	}
	if s.n > 0 {
		s.max = max
	}
}

func (s *idSet) has(id uint64) bool {
	if s.m != nil {
		_, ok := s.m[id]
		return ok
	}
	w := id / 64
	return w < uint64(len(s.bits)) && s.bits[w]&(1<<(id%64)) != 0
}

func (s *idSet) toMap() {
	s.m = make(map[uint64]struct{}, s.n)
	for w, x := range s.bits {
		for x != 0 {
			s.m[uint64(w)*64+uint64(bits.TrailingZeros64(x))] = struct{}{}
			x &= x - 1
		}
	}
	s.bits = nil
}

// intIndex maps a member id of an idSet to its node index, the rank of the
// id among the members: node i is the i-th smallest id.
type intIndex struct {
	n    int
	ints []uint64 // ints[i] is node i's id; nil when the ids are 0..n-1

	bits []uint64 // bitmap mode: the set's bitmap and
	rank []uint32 // rank[w] = members below word w
	m    map[uint64]uint32
}

// index freezes the set into an intIndex. The set must not be used after.
func (s *idSet) index() *intIndex {
	x := &intIndex{n: s.n}
	if s.m != nil {
		x.ints = make([]uint64, 0, len(s.m))
		for id := range s.m {
			x.ints = append(x.ints, id)
		}
		slices.Sort(x.ints)
		x.m = make(map[uint64]uint32, len(x.ints))
		for i, id := range x.ints {
			x.m[id] = uint32(i)
		}
		return x
	}
	x.bits = s.bits
	if s.n == 0 || uint64(s.n) == s.max+1 {
		return x // dense: the id is the index
	}
	x.rank = make([]uint32, len(s.bits))
	x.ints = make([]uint64, 0, s.n)
	r := 0
	for w, word := range s.bits {
		x.rank[w] = uint32(r)
		r += bits.OnesCount64(word)
		for word != 0 {
			x.ints = append(x.ints, uint64(w)*64+uint64(bits.TrailingZeros64(word)))
			word &= word - 1
		}
	}
	return x
}

// lookup is id's node index, false when id is not a member.
func (x *intIndex) lookup(id uint64) (uint32, bool) {
	switch {
	case x.m != nil:
		i, ok := x.m[id]
		return i, ok
	case x.rank == nil:
		return uint32(id), id < uint64(x.n)
	}
	w, b := id/64, id%64
	if w >= uint64(len(x.bits)) || x.bits[w]&(1<<b) == 0 {
		return 0, false
	}
	return x.rank[w] + uint32(bits.OnesCount64(x.bits[w]&(1<<b-1))), true
}

// name is node i's id as text.
func (x *intIndex) name(i uint32) string {
	if x.ints == nil {
		return strconv.FormatUint(uint64(i), 10)
	}
	return strconv.FormatUint(x.ints[i], 10)
}

// nameIDs interns string ids in first-seen order.
type nameIDs struct {
	m     map[string]uint32
	names []string
}

func newNameIDs(n int) *nameIDs {
	return &nameIDs{m: make(map[string]uint32, n), names: make([]string, 0, n)}
}

// lookup does not allocate: the compiler elides string(b) in a map index.
func (t *nameIDs) lookup(b []byte) (uint32, bool) {
	i, ok := t.m[string(b)]
	return i, ok
}

// intern returns b's index, adding it when new.
func (t *nameIDs) intern(b []byte) uint32 {
	if i, ok := t.m[string(b)]; ok {
		return i
	}
	return t.add(string(b))
}

func (t *nameIDs) add(name string) uint32 {
	i := uint32(len(t.names))
	t.m[name] = i
	t.names = append(t.names, name)
	return i
}

// finishInts fixes the node set and order and relabels Src/Dst in place.
func (r *edgeList) finishInts() {
	g := r.g
	set := r.known
	if set == nil {
		n := len(g.Src) * 2
		if r.wide {
			n = len(r.wideIDs)
		}
		set = newIDSet(r.maxID, n)
		if r.wide {
			for _, id := range r.wideIDs {
				set.add(id)
			}
		} else {
			set.addAll(r.maxID, g.Src, g.Dst)
		}
	}
	if r.opts.Dangling == Add { // label ids outside the node set become nodes
		for _, p := range r.labels.pairs {
			if id, ok := parseUint([]byte(p.id)); ok && !set.has(id) {
				set.add(id)
				g.Stats.Dangling++
			}
		}
	}
	x := set.index()
	r.index = x
	g.NumNodes = x.n
	g.IDs.Ints = x.ints
	if r.wide {
		perm := make([]uint32, len(r.wideIDs))
		for i, id := range r.wideIDs {
			perm[i], _ = x.lookup(id)
		}
		for i := range g.Src {
			g.Src[i], g.Dst[i] = perm[g.Src[i]], perm[g.Dst[i]]
		}
		r.wideIDs, r.wideIdx = nil, nil
		return
	}
	if x.ints == nil {
		return // dense: raw ids are the indices
	}
	if x.m != nil {
		for i := range g.Src {
			a, _ := x.lookup(uint64(g.Src[i]))
			b, _ := x.lookup(uint64(g.Dst[i]))
			g.Src[i], g.Dst[i] = a, b
		}
		return
	}
	for _, ends := range [][]uint32{g.Src, g.Dst} { // the rank lookup, inlined
		for i, id := range ends {
			w := id >> 6
			ends[i] = x.rank[w] + uint32(bits.OnesCount64(x.bits[w]&(1<<(id&63)-1)))
		}
	}
}

// intID parses an id as an integer. Until the ids are decided (IDs auto)
// a number spelt with a leading zero is not one: "007" and "7" would be
// one node as integers, and once a later id turned the ids into strings
// the node would be named "7", apart from a "007" read after the switch
// (the graph split a node in two, or dropped its edges as dangling).
// Such an id makes the ids strings, spelt as written; with --ids int it
// is the number.
func (r *edgeList) intID(b []byte) (uint64, bool) {
	v, ok := parseUint(b)
	if ok && !r.decided && len(b) > 1 && b[0] == '0' {
		return 0, false
	}
	return v, ok
}

// toStrings turns the integer ids read so far into names (IDs auto, on the
// first id that is not an integer).
func (r *edgeList) toStrings() {
	r.finishInts()
	n := r.g.NumNodes
	r.names = newNameIDs(n)
	for i := range n {
		r.names.add(r.index.name(uint32(i)))
	}
	r.g.IDs.Ints, r.index = nil, nil
	r.strs, r.decided = true, true
}

// goWide switches integer ids to first-seen indices through a map, for ids
// above 2^32-1.
func (r *edgeList) goWide() {
	r.wide = true
	r.wideIdx = make(map[uint64]uint32)
	for _, ends := range [][]uint32{r.g.Src, r.g.Dst} {
		for i, id := range ends {
			ends[i] = r.wideIndex(uint64(id))
		}
	}
}

func (r *edgeList) wideIndex(id uint64) uint32 {
	if i, ok := r.wideIdx[id]; ok {
		return i
	}
	i := uint32(len(r.wideIDs))
	r.wideIdx[id] = i
	r.wideIDs = append(r.wideIDs, id)
	return i
}

// fitsNarrow: raw ids must leave room for the node count in uint32.
const maxNarrowID = math.MaxUint32 - 1

// readNodes reads the node file: one id per line.
func (r *edgeList) readNodes(path string) error {
	var ints []uint64 // node-file order, while the ids may still turn out strings
	var f [edgeSplit][]byte
	err := scanFile(r.ctx, path, r.opts.Progress, func(s *lineScanner, line []byte) error {
		if isComment(line) {
			return nil
		}
		if n, msg := splitFields(line, &f); msg != "" || n != 1 {
			if msg == "" {
				msg = "want 1 field, got " + strconv.Itoa(n)
			}
			return s.errorf("%s", msg)
		}
		if !r.strs {
			if id, ok := r.intID(f[0]); ok {
				ints = append(ints, id)
				return nil
			}
			if r.decided {
				return s.errorf("node id %q is not an integer", f[0])
			}
			r.strs = true
			for _, id := range ints {
				r.names.add(strconv.FormatUint(id, 10))
			}
			ints = nil
		}
		if _, ok := r.names.lookup(f[0]); ok {
			return s.errorf("node %q listed twice", f[0])
		}
		if msg := nameFault("node id", NamesFile, f[0]); msg != "" {
			return s.errorf("%s", msg)
		}
		r.names.add(string(f[0]))
		return nil
	})
	if err != nil {
		return err
	}
	r.decided = true
	if r.strs {
		r.knownNames = true
		return nil
	}
	var mx uint64
	for _, id := range ints {
		mx = max(mx, id)
	}
	r.known = newIDSet(mx, len(ints))
	for i, id := range ints {
		if !r.known.add(id) {
			return formatErrorf("%s: node %d listed twice (second time as id number %d)", path, id, i+1)
		}
	}
	return nil
}

// nodeName is node i's id as text, for messages.
func (r *edgeList) nodeName(i uint32) string {
	if r.strs {
		return r.names.names[i]
	}
	return r.index.name(i)
}
