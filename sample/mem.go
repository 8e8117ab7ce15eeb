package sample

import (
	"errors"
	"fmt"
	"slices"
)

// MemData is the content of an in-memory partition: a CSR over the owned
// range [Start, Start+len(Indptr)-1) with neighbour lists in global ids,
// and optional weights, features and labels. It mirrors the sections of a
// part.csr file, for tests, benchmarks and callers that build graphs in
// memory.
type MemData struct {
	Start   uint64
	Indptr  []uint64  // owned nodes + 1, Indptr[0] == 0, non-decreasing
	Indices []uint64  // global ids, each list sorted ascending
	Weights []float32 // one per edge, or nil
	Schema  Schema
	Feat    []byte  // owned nodes × Schema.RowBytes(), or nil when FeatDim == 0
	Labels  []int32 // owned nodes × Schema.LabelDim, or nil when LabelDim == 0
}

// Mem is an in-memory Partition. It is immutable after NewMem and safe for
// concurrent use.
type Mem struct {
	d        MemData
	rowBytes int
}

// NewMem checks d and wraps it; the slices are kept, not copied.
func NewMem(d MemData) (*Mem, error) {
	var errs []error
	if err := d.Schema.validate(); err != nil {
		errs = append(errs, err)
	}
	if len(d.Indptr) == 0 {
		errs = append(errs, errors.New("indptr is empty"))
	} else {
		n := len(d.Indptr) - 1
		if uint64(n) > 1<<32 || d.Start+uint64(n) < d.Start {
			errs = append(errs, fmt.Errorf("%d nodes from %d overflow the id space", n, d.Start))
		}
		if d.Indptr[0] != 0 || d.Indptr[n] != uint64(len(d.Indices)) {
			errs = append(errs, fmt.Errorf("indptr spans [%d, %d], want [0, %d]", d.Indptr[0], d.Indptr[n], len(d.Indices)))
		}
		for v := range n {
			a, b := d.Indptr[v], d.Indptr[v+1]
			if a > b || b > uint64(len(d.Indices)) {
				errs = append(errs, fmt.Errorf("indptr not monotone at %d", v))
				break
			}
			if !slices.IsSorted(d.Indices[a:b]) {
				errs = append(errs, fmt.Errorf("neighbours of local node %d not sorted", v))
				break
			}
		}
		if d.Weights != nil && len(d.Weights) != len(d.Indices) {
			errs = append(errs, fmt.Errorf("%d weights for %d edges", len(d.Weights), len(d.Indices)))
		}
		if want := n * d.Schema.RowBytes(); len(d.Feat) != want {
			errs = append(errs, fmt.Errorf("feat is %d bytes, want %d", len(d.Feat), want))
		}
		if want := n * d.Schema.LabelDim; len(d.Labels) != want {
			errs = append(errs, fmt.Errorf("%d labels, want %d", len(d.Labels), want))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("sample: in-memory partition at %d: %w: %w", d.Start, err, ErrInvalid)
	}
	return &Mem{d: d, rowBytes: d.Schema.RowBytes()}, nil
}

func (m *Mem) Start() uint64  { return m.d.Start }
func (m *Mem) End() uint64    { return m.d.Start + uint64(len(m.d.Indptr)-1) }
func (m *Mem) Schema() Schema { return m.d.Schema }

func (m *Mem) Neighbors(v uint32) []uint64 {
	return m.d.Indices[m.d.Indptr[v]:m.d.Indptr[v+1]]
}

func (m *Mem) Weights(v uint32) []float32 {
	if m.d.Weights == nil {
		return nil
	}
	return m.d.Weights[m.d.Indptr[v]:m.d.Indptr[v+1]]
}

func (m *Mem) FeatRow(v uint32) []byte {
	if m.rowBytes == 0 {
		return nil
	}
	o := int(v) * m.rowBytes
	return m.d.Feat[o : o+m.rowBytes]
}

func (m *Mem) flat() (indptr, indices []uint64, weights []float32) {
	return m.d.Indptr, m.d.Indices, m.d.Weights
}

// FeatBlock is the whole feature block, rows of the owned nodes in order;
// LocalSource copies from it directly.
func (m *Mem) FeatBlock() []byte { return m.d.Feat }

func (m *Mem) Labels(v uint32) []int32 {
	k := m.d.Schema.LabelDim
	if k == 0 {
		return nil
	}
	return m.d.Labels[int(v)*k : int(v)*k+k]
}

// BuildCSR turns directed edges src[i] → dst[i] (global ids) into the
// in-neighbour CSR of the nodes [start, end): for each such destination, the
// sorted sources. Edges whose destination lies outside are skipped, so the
// same edge list builds every partition. w, when non-nil, is carried along.
func BuildCSR(start, end uint64, src, dst []uint64, w []float32) (indptr, indices []uint64, weights []float32) {
	n := int(end - start)
	indptr = make([]uint64, n+1)
	for _, d := range dst {
		if d-start < uint64(n) {
			indptr[d-start+1]++
		}
	}
	for v := range n {
		indptr[v+1] += indptr[v]
	}
	indices = make([]uint64, indptr[n])
	if w != nil {
		weights = make([]float32, indptr[n])
	}
	fill := slices.Clone(indptr[:n])
	for i, d := range dst {
		if d-start < uint64(n) {
			indices[fill[d-start]] = src[i]
			if w != nil {
				weights[fill[d-start]] = w[i]
			}
			fill[d-start]++
		}
	}
	var pairs []edgeW
	for v := range n {
		a, b := indptr[v], indptr[v+1]
		if w == nil {
			slices.Sort(indices[a:b])
			continue
		}
		pairs = pairs[:0]
		for e := a; e < b; e++ {
			pairs = append(pairs, edgeW{indices[e], weights[e]})
		}
		slices.SortStableFunc(pairs, func(x, y edgeW) int {
			switch {
			case x.id < y.id:
				return -1
			case x.id > y.id:
				return 1
			}
			return 0
		})
		for i, p := range pairs {
			indices[a+uint64(i)], weights[a+uint64(i)] = p.id, p.w
		}
	}
	return indptr, indices, weights
}

type edgeW struct {
	id uint64
	w  float32
}
