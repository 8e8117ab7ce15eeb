package csr

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"

	"github.com/RoaringBitmap/roaring/v2"
)

// knownType is the element type the format fixes for a section name.
// ok is false for names the format does not know (they are carried as
// they are). For feature sections it is Meta.FeatType, which is 0 when
// the meta has no feature columns.
func knownType(m Meta, name string) (t ElemType, ok bool) {
	switch name {
	case SecIndptr, SecIndices, SecCacheIDs:
		return TypeU64, true
	case SecWeights:
		return TypeF32, true
	case SecEtype:
		return TypeU32, true
	case SecFeat, SecCacheFeat:
		return m.FeatType, true
	case SecLabel:
		return TypeI32, true
	case SecTrain, SecVal, SecTest:
		return TypeRoaring, true
	}
	return 0, false
}

// knownLen is the byte length the meta fixes for a section name; cacheRows
// is the number of cache_ids. Products that overflow saturate, so they
// match no real length.
func knownLen(m Meta, name string, cacheRows uint64) (n uint64, ok bool) {
	nodes := m.End - m.Start
	switch name {
	case SecIndptr:
		return mulSat(nodes+1, 8), true
	case SecIndices:
		return mulSat(m.NumEdges, 8), true
	case SecWeights, SecEtype:
		return mulSat(m.NumEdges, 4), true
	case SecFeat:
		return mulSat(nodes, rowBytes(m)), true
	case SecCacheFeat:
		return mulSat(cacheRows, rowBytes(m)), true
	case SecLabel:
		return mulSat(mulSat(nodes, uint64(m.LabelDim)), 4), true
	}
	return 0, false
}

// rowBytes is the size of one feature row; FeatDim < 2^32 and the element
// is at most 4 bytes, so it cannot overflow.
func rowBytes(m Meta) uint64 { return uint64(m.FeatDim) * uint64(m.FeatType.Size()) }

func mulSat(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

func isMask(name string) bool { return name == SecTrain || name == SecVal || name == SecTest }

// corrupt formats a problem of one section.
func corrupt(name, format string, a ...any) error {
	return fmt.Errorf("section %q: %s: %w", name, fmt.Sprintf(format, a...), ErrCorrupt)
}

// checkTable runs the checks that need only the table and the meta: CRCs
// (when verify), element types, lengths, required and paired sections.
// raw(s) is the section's bytes.
func checkTable(m Meta, secs []Section, raw func(i int) []byte, verify bool) error {
	if verify {
		tab := castagnoli()
		for i, s := range secs {
			if got := crc32.Checksum(raw(i), tab); got != s.CRC {
				return corrupt(s.Name, "checksum mismatch (stored %08x, computed %08x)", s.CRC, got)
			}
		}
	}
	var cacheRows uint64
	has := map[string]bool{}
	for _, s := range secs {
		has[s.Name] = true
		if s.Name == SecCacheIDs {
			cacheRows = s.Length / 8
		}
	}
	for _, s := range secs {
		want, ok := knownType(m, s.Name)
		if !ok {
			continue // a section of a later minor version
		}
		if want == 0 {
			return corrupt(s.Name, "present, but the header has no feature columns")
		}
		if s.Type != want {
			return corrupt(s.Name, "element type %s, want %s", s.Type, want)
		}
		if s.Name == SecLabel && m.LabelDim == 0 {
			return corrupt(s.Name, "present, but the header has no label columns")
		}
		if n, ok := knownLen(m, s.Name, cacheRows); ok && n != s.Length {
			return corrupt(s.Name, "%d bytes, the header implies %d", s.Length, n)
		}
	}
	for _, name := range []string{SecIndptr, SecIndices} {
		if !has[name] {
			return corrupt(name, "required section missing")
		}
	}
	if has[SecCacheIDs] != has[SecCacheFeat] {
		return corrupt(SecCacheIDs, "%q and %q must both be present or both absent", SecCacheIDs, SecCacheFeat)
	}
	return nil
}

// checkCSR checks that indptr starts at 0, never decreases and ends at
// len(indices), that every neighbour list is sorted, and that every id is
// below total. Lengths were checked by checkTable. Two tight passes: one
// over indptr, one over indices; as lists are sorted, only the last id of
// each list needs the range check.
func checkCSR(indptr, indices []uint64, total uint64) error {
	if indptr[0] != 0 {
		return corrupt(SecIndptr, "starts at %d, want 0", indptr[0])
	}
	prev := uint64(0)
	for i, x := range indptr {
		if x < prev {
			return corrupt(SecIndptr, "not monotone at %d (%d after %d)", i, x, prev)
		}
		prev = x
	}
	if prev != uint64(len(indices)) {
		return corrupt(SecIndptr, "ends at %d, but there are %d indices", prev, len(indices))
	}
	lo := uint64(0)
	for v, hi := range indptr[1:] {
		list := indices[lo:hi]
		lo = hi
		if len(list) == 0 {
			continue
		}
		last := list[0]
		for j, x := range list {
			if x < last {
				return corrupt(SecIndices, "neighbour list of node %d not sorted at edge %d", v, indptr[v]+uint64(j))
			}
			last = x
		}
		if last >= total {
			j := 0
			for list[j] < total {
				j++
			}
			return corrupt(SecIndices, "id %d of node %d at edge %d >= %d total nodes", list[j], v, indptr[v]+uint64(j), total)
		}
	}
	return nil
}

// checkLabels: one class index (or -1) per node, or multi-hot columns of
// 0/1 (or -1 for a node without labels).
func checkLabels(m Meta, labels []int32) error {
	dim := int(m.LabelDim)
	if dim == 1 {
		for i, x := range labels {
			if x != -1 && uint32(x) >= m.NumClasses {
				return corrupt(SecLabel, "node %d has class %d, want -1 or [0, %d)", i, x, m.NumClasses)
			}
		}
		return nil
	}
	for i, x := range labels {
		if x < -1 || x > 1 {
			return corrupt(SecLabel, "node %d column %d is %d, want -1, 0 or 1", i/dim, i%dim, x)
		}
	}
	return nil
}

// checkCacheIDs: every cached id is a node of the graph owned elsewhere,
// listed once, ascending: row i of cache_feat is the row of ids[i], and a
// reader finds an id's row by its rank (node/'s cache index), which an
// id listed twice or out of order would make ambiguous or wrong.
func checkCacheIDs(m Meta, ids []uint64) error {
	for i, x := range ids {
		if x >= m.TotalNodes || (x >= m.Start && x < m.End) {
			return corrupt(SecCacheIDs, "id %d at %d is outside [0, %d) or owned here [%d, %d)", x, i, m.TotalNodes, m.Start, m.End)
		}
		if i > 0 && x <= ids[i-1] {
			return corrupt(SecCacheIDs, "id %d at %d follows %d: not strictly ascending", x, i, ids[i-1])
		}
	}
	return nil
}

// decodeMask decodes a portable roaring bitmap into memory of its own (the
// reader copies; nothing points into b) and checks it holds local indices
// below nodes.
func decodeMask(name string, b []byte, nodes uint64) (bm *roaring.Bitmap, err error) {
	// The roaring decoder is third-party code fed with bytes from disk; a
	// panic in it must surface as a corrupt file, not take the process down.
	// A fault on the mapping (under Graph.Read's SetPanicOnFault) is no
	// malformed bitmap but a changed file: it goes on to Read.
	defer func() {
		if r := recover(); r != nil {
			if _, fault := r.(interface{ Addr() uintptr }); fault {
				panic(r)
			}
			bm, err = nil, corrupt(name, "malformed roaring bitmap (%v)", r)
		}
	}()
	bm = roaring.New()
	n, err := bm.ReadFrom(bytes.NewReader(b))
	if err != nil {
		return nil, corrupt(name, "malformed roaring bitmap (%v)", err)
	}
	if n != int64(len(b)) {
		return nil, corrupt(name, "roaring bitmap is %d bytes, section holds %d", n, len(b))
	}
	if err := bm.Validate(); err != nil {
		return nil, corrupt(name, "malformed roaring bitmap (%v)", err)
	}
	if !bm.IsEmpty() && uint64(bm.Maximum()) >= nodes {
		return nil, corrupt(name, "local index %d >= %d owned nodes", bm.Maximum(), nodes)
	}
	return bm, nil
}
