package partition

import (
	"fmt"
	"sort"
)

// Book is the partition book: partition p owns the relabelled global ids
// [Bounds[p], Bounds[p+1]). Owner lookup is a binary search over P+1 bounds.
type Book struct {
	Bounds []uint64 // P+1 non-decreasing bounds, Bounds[0] == 0
}

// NewBook checks bounds and returns the book.
func NewBook(bounds []uint64) (Book, error) {
	if len(bounds) < 2 {
		return Book{}, fmt.Errorf("partition: book needs at least 2 bounds, got %d", len(bounds))
	}
	if bounds[0] != 0 {
		return Book{}, fmt.Errorf("partition: book starts at %d, want 0", bounds[0])
	}
	for i := 1; i < len(bounds); i++ {
		if bounds[i] < bounds[i-1] {
			return Book{}, fmt.Errorf("partition: book bounds decrease at part %d (%d < %d)", i-1, bounds[i], bounds[i-1])
		}
	}
	return Book{Bounds: bounds}, nil
}

// Parts is the number of partitions.
func (b Book) Parts() int { return len(b.Bounds) - 1 }

// NumNodes is the number of nodes in the whole graph.
func (b Book) NumNodes() uint64 { return b.Bounds[len(b.Bounds)-1] }

// Range is the id range [start, end) of partition p.
func (b Book) Range(p int) (start, end uint64) { return b.Bounds[p], b.Bounds[p+1] }

// Owner is the partition that owns gid. gid must be below NumNodes.
func (b Book) Owner(gid uint64) int {
	// The first bound strictly greater than gid closes the owner's range.
	return sort.Search(len(b.Bounds)-1, func(i int) bool { return b.Bounds[i+1] > gid })
}

// Local is gid's owner and its local index there.
func (b Book) Local(gid uint64) (part int, local uint32) {
	p := b.Owner(gid)
	return p, uint32(gid - b.Bounds[p])
}
