package sample

import (
	"context"
	"fmt"
)

// LocalSource serves features and labels of the nodes a Partition owns:
// the FeatureSource and LabelSource of a single-process loader, and the
// local tier of node/'s composed sources. Safe for concurrent use.
type LocalSource struct {
	p        Partition
	start, n uint64
	rowBytes int
	labelDim int
	block    []byte // the partition's contiguous feature block, when it has one
}

// featBlocker is a Partition whose feature rows are one contiguous block
// (Mem, CSR): the gather loop then slices it instead of calling FeatRow.
type featBlocker interface {
	FeatBlock() []byte
}

// NewLocalSource serves p.
func NewLocalSource(p Partition) *LocalSource {
	s := &LocalSource{
		p:        p,
		start:    p.Start(),
		n:        p.End() - p.Start(),
		rowBytes: p.Schema().RowBytes(),
		labelDim: p.Schema().LabelDim,
	}
	if fb, ok := p.(featBlocker); ok {
		if b := fb.FeatBlock(); uint64(len(b)) == s.n*uint64(s.rowBytes) {
			s.block = b
		}
	}
	return s
}

// Gather copies the rows of ids into dst, which must hold exactly
// len(ids) rows. It is the hot loop of feature collection.
func (s *LocalSource) Gather(ctx context.Context, ids []uint64, dst []byte) error {
	rb := s.rowBytes
	if len(dst) != len(ids)*rb {
		return fmt.Errorf("sample: gather %d rows of %d bytes into %d bytes: %w", len(ids), rb, len(dst), ErrInvalid)
	}
	if rb == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sample: gather: %w", err)
	}
	if s.block != nil {
		block := s.block
		for i, id := range ids {
			l := id - s.start
			if l >= s.n {
				return s.notOwned(id)
			}
			o := int(l) * rb
			copy(dst[i*rb:(i+1)*rb], block[o:o+rb])
		}
		return nil
	}
	for i, id := range ids {
		l := id - s.start
		if l >= s.n {
			return s.notOwned(id)
		}
		copy(dst[i*rb:(i+1)*rb], s.p.FeatRow(uint32(l)))
	}
	return nil
}

// GatherLabels writes the labels of ids, widened to int64, into dst,
// which must hold exactly len(ids) × LabelDim values.
func (s *LocalSource) GatherLabels(ctx context.Context, ids []uint64, dst []int64) error {
	k := s.labelDim
	if len(dst) != len(ids)*k {
		return fmt.Errorf("sample: gather %d labels of dim %d into %d values: %w", len(ids), k, len(dst), ErrInvalid)
	}
	for i, id := range ids {
		l := id - s.start
		if l >= s.n {
			return s.notOwned(id)
		}
		for j, y := range s.p.Labels(uint32(l)) {
			dst[i*k+j] = int64(y)
		}
	}
	return nil
}

func (s *LocalSource) notOwned(id uint64) error {
	return fmt.Errorf("sample: gather: node %d not in partition range [%d, %d): %w", id, s.start, s.start+s.n, ErrNotOwned)
}
