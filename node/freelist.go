package node

// freeList keeps up to cap(list) idle buffers for reuse. Unlike a
// sync.Pool it is not emptied by garbage collections: the buffers here
// are tens of megabytes (a batch's pulled feature rows), and one dropped
// at every collection is as many fresh pages to fault in and zero on the
// next batch. Safe for concurrent use.
type freeList[T any] struct {
	list  chan *T
	fresh func() *T
}

func newFreeList[T any](size int, fresh func() *T) *freeList[T] {
	return &freeList[T]{list: make(chan *T, size), fresh: fresh}
}

// get returns an idle buffer, or a fresh one when none is idle.
func (f *freeList[T]) get() *T {
	select {
	case b := <-f.list:
		return b
	default:
		return f.fresh()
	}
}

// put keeps b for a later get, or drops it when the list is full.
func (f *freeList[T]) put(b *T) {
	select {
	case f.list <- b:
	default:
	}
}
