package sample

import (
	"fmt"

	"graphnode/csr"
)

// CSR is a Partition over an opened partition file. The slices it holds
// are the file's mapped views: it is valid until the csr.Graph is closed,
// and safe for concurrent use.
type CSR struct {
	g        *csr.Graph
	start    uint64
	end      uint64
	indptr   []uint64
	indices  []uint64
	weights  []float32
	feat     []byte
	rowBytes int
	labels   []int32
	schema   Schema
}

// FromCSR adapts an opened partition file. The file's feature type must be
// f32 or f16 (or absent).
func FromCSR(g *csr.Graph) (*CSR, error) {
	m := g.Meta()
	schema := Schema{FeatDim: int(m.FeatDim), LabelDim: int(m.LabelDim)}
	switch {
	case m.FeatDim == 0:
	case m.FeatType == csr.TypeF32:
		schema.XType = F32
	case m.FeatType == csr.TypeF16:
		schema.XType = F16
	default:
		return nil, fmt.Errorf("sample: %s: feature type %v: want f32 or f16: %w", g.Path(), m.FeatType, ErrInvalid)
	}
	c := &CSR{
		g:        g,
		start:    m.Start,
		end:      m.End,
		indptr:   g.Indptr(),
		indices:  g.Indices(),
		weights:  g.Weights(),
		schema:   schema,
		rowBytes: schema.RowBytes(),
	}
	if n := m.End - m.Start; uint64(len(c.indptr)) != n+1 || n > 1<<32 {
		return nil, fmt.Errorf("sample: %s: indptr of %d entries for %d nodes: %w", g.Path(), len(c.indptr), n, ErrInvalid)
	}
	if schema.FeatDim > 0 {
		c.feat = g.FeatBytes()
		if want := int(m.End-m.Start) * c.rowBytes; len(c.feat) != want {
			return nil, fmt.Errorf("sample: %s: feat is %d bytes, want %d: %w", g.Path(), len(c.feat), want, ErrInvalid)
		}
	}
	if schema.LabelDim > 0 {
		c.labels = g.Labels()
		if want := int(m.End-m.Start) * schema.LabelDim; len(c.labels) != want {
			return nil, fmt.Errorf("sample: %s: %d labels, want %d: %w", g.Path(), len(c.labels), want, ErrInvalid)
		}
	}
	if c.weights != nil && len(c.weights) != len(c.indices) {
		return nil, fmt.Errorf("sample: %s: %d weights for %d edges: %w", g.Path(), len(c.weights), len(c.indices), ErrInvalid)
	}
	return c, nil
}

// Graph is the adapted file.
func (c *CSR) Graph() *csr.Graph { return c.g }

func (c *CSR) Start() uint64  { return c.start }
func (c *CSR) End() uint64    { return c.end }
func (c *CSR) Schema() Schema { return c.schema }

func (c *CSR) Neighbors(v uint32) []uint64 { return c.indices[c.indptr[v]:c.indptr[v+1]] }

func (c *CSR) Weights(v uint32) []float32 {
	if c.weights == nil {
		return nil
	}
	return c.weights[c.indptr[v]:c.indptr[v+1]]
}

func (c *CSR) FeatRow(v uint32) []byte {
	if c.rowBytes == 0 {
		return nil
	}
	o := int(v) * c.rowBytes
	return c.feat[o : o+c.rowBytes]
}

func (c *CSR) flat() (indptr, indices []uint64, weights []float32) {
	return c.indptr, c.indices, c.weights
}

// FeatBlock is the mapped feature section.
func (c *CSR) FeatBlock() []byte { return c.feat }

func (c *CSR) Labels(v uint32) []int32 {
	k := c.schema.LabelDim
	if k == 0 {
		return nil
	}
	return c.labels[int(v)*k : int(v)*k+k]
}
