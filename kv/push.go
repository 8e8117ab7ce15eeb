package kv

import "fmt"

// scratch is per-push working memory, recycled through Store.scratch so a
// steady stream of pushes allocates nothing.
type scratch struct {
	locals []int32
	first  map[int32]int32 // local row -> its index in merged
	merged []int32
	grads  []float32
}

// push applies grads (len(ids)·dim) to the rows ids. Every id is checked
// before any row changes, so a push with a foreign id applies nothing.
// Duplicate ids are summed first, in the order they appear, and the
// optimiser then runs once per distinct row: the gradient of a loss with
// respect to a row that occurs k times in a batch is the sum of its k
// contributions. t.mu is held shared by the caller.
func (t *table) push(ids []uint64, grads []float32, sc *scratch) error {
	if len(grads) != len(ids)*t.dim {
		return fmt.Errorf("kv: table %q: push of %d ids with %d gradient values, want %d (dim %d): %w",
			t.spec.Name, len(ids), len(grads), len(ids)*t.dim, t.dim, ErrShape)
	}
	if len(ids) == 0 {
		return nil // no update: the version, which counts them, stays
	}
	if err := t.finite(grads, ids); err != nil {
		return err
	}
	var err error
	sc.locals, err = t.local(ids, sc.locals[:0])
	if err != nil {
		return err
	}
	locals, g := sc.locals, grads
	if !strictlyIncreasing(locals) {
		locals, g = sc.dedup(locals, grads, t.dim)
	}
	for i, r := range locals {
		s := &t.stripes[int(r)%nStripes]
		s.Lock()
		t.applyRow(int(r), g[i*t.dim:(i+1)*t.dim])
		s.Unlock()
	}
	t.version.Add(1)
	return nil
}

// dedup returns locals and grads with duplicate rows merged (gradients
// summed in order of appearance), or its inputs when every row is distinct.
func (sc *scratch) dedup(locals []int32, grads []float32, dim int) ([]int32, []float32) {
	if sc.first == nil {
		sc.first = make(map[int32]int32, len(locals))
	}
	clear(sc.first)
	for i, r := range locals {
		if _, ok := sc.first[r]; !ok {
			sc.first[r] = int32(i)
		}
	}
	if len(sc.first) == len(locals) {
		return locals, grads
	}
	clear(sc.first)
	sc.merged = sc.merged[:0]
	sc.grads = sc.grads[:0]
	for i, r := range locals {
		g := grads[i*dim : (i+1)*dim]
		k, ok := sc.first[r]
		if !ok {
			sc.first[r] = int32(len(sc.merged))
			sc.merged = append(sc.merged, r)
			sc.grads = append(sc.grads, g...)
			continue
		}
		acc := sc.grads[int(k)*dim : (int(k)+1)*dim]
		for j := range acc {
			acc[j] += g[j]
		}
	}
	return sc.merged, sc.grads
}

func strictlyIncreasing(a []int32) bool {
	for i := 1; i < len(a); i++ {
		if a[i] <= a[i-1] {
			return false
		}
	}
	return true
}

// finite refuses grads holding a NaN or an infinity, naming the row (ids[i]
// for row i; nil: the shard's own rows in order, as a sync push sends
// them) and the column: one such value would spoil its row for every
// trainer, and through Adagrad's or Adam's state for every later step. The
// Go trainers check their gradients before they push; other clients may not.
func (t *table) finite(grads []float32, ids []uint64) error {
	if allFinite(grads) {
		return nil
	}
	for i, x := range grads {
		if x-x == 0 { // false for NaN and ±Inf only
			continue
		}
		row, col := i/t.dim, i%t.dim
		id := t.lo + uint64(row)
		if ids != nil {
			id = ids[row]
		}
		return fmt.Errorf("kv: table %q: gradient of id %d is %v at column %d: %w", t.spec.Name, id, x, col, ErrNonFinite)
	}
	return nil
}

// allFinite reports whether g holds no NaN and no infinity: x*0 is 0 for
// every finite x and NaN otherwise, and NaN spreads through a sum. Four
// sums without branches take half the time of a test per value (94 against
// 190 µs for 1024 rows of 400 values; SGD applies them in 370 µs).
func allFinite(g []float32) bool {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(g); i += 4 {
		q := g[i : i+4 : i+4]
		s0 += q[0] * 0
		s1 += q[1] * 0
		s2 += q[2] * 0
		s3 += q[3] * 0
	}
	for ; i < len(g); i++ {
		s0 += g[i] * 0
	}
	return s0+s1+s2+s3 == 0
}
