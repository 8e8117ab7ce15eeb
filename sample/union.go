package sample

import (
	"errors"
	"fmt"
)

// Union is the whole graph seen through all its partitions and their
// book: one Partition over [0, book.NumNodes()) whose local index is the
// global id. A Sampler over a Union is the reference of the distributed
// invariant (DESIGN.md §5): its batches are byte-identical to those of a
// cluster serving the same partitions. Safe for concurrent use when the
// parts are.
type Union struct {
	book   Book
	parts  []Partition
	schema Schema
}

// NewUnion checks that parts[p] owns exactly book.Range(p) and that all
// parts share one schema. The id space must fit uint32 local indices.
func NewUnion(book Book, parts []Partition) (*Union, error) {
	if book == nil {
		return nil, fmt.Errorf("sample: union: nil book: %w", ErrInvalid)
	}
	var errs []error
	if len(parts) != book.Parts() {
		errs = append(errs, fmt.Errorf("%d parts for a book of %d", len(parts), book.Parts()))
	}
	if book.Parts() > 0 && book.NumNodes() > 1<<32 {
		errs = append(errs, fmt.Errorf("%d nodes exceed the 2^32 local index space", book.NumNodes()))
	}
	var schema Schema
	for p, part := range parts {
		if p >= book.Parts() {
			break
		}
		start, end := book.Range(p)
		if part.Start() != start || part.End() != end {
			errs = append(errs, fmt.Errorf("part %d owns [%d, %d), book says [%d, %d)", p, part.Start(), part.End(), start, end))
		}
		if p == 0 {
			schema = part.Schema()
		} else if part.Schema() != schema {
			errs = append(errs, fmt.Errorf("part %d schema %+v differs from part 0's %+v", p, part.Schema(), schema))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("sample: union: %w: %w", err, ErrInvalid)
	}
	return &Union{book: book, parts: parts, schema: schema}, nil
}

func (u *Union) Start() uint64  { return 0 }
func (u *Union) End() uint64    { return u.book.NumNodes() }
func (u *Union) Schema() Schema { return u.schema }

// Book is the partition book the union was built with.
func (u *Union) Book() Book { return u.book }

// Part is partition p.
func (u *Union) Part(p int) Partition { return u.parts[p] }

func (u *Union) Neighbors(v uint32) []uint64 {
	p, l := u.book.Local(uint64(v))
	return u.parts[p].Neighbors(l)
}

func (u *Union) Weights(v uint32) []float32 {
	p, l := u.book.Local(uint64(v))
	return u.parts[p].Weights(l)
}

func (u *Union) FeatRow(v uint32) []byte {
	p, l := u.book.Local(uint64(v))
	return u.parts[p].FeatRow(l)
}

func (u *Union) Labels(v uint32) []int32 {
	p, l := u.book.Local(uint64(v))
	return u.parts[p].Labels(l)
}
