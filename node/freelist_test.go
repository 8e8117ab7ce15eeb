package node

import (
	"runtime"
	"testing"
)

// A freeList hands back what was put, survives garbage collections (which
// empty a sync.Pool), makes fresh buffers when empty and drops what does
// not fit.
func TestFreeList(t *testing.T) {
	made := 0
	f := newFreeList(2, func() *[]byte { made++; b := make([]byte, 0, 8); return &b })
	a, b, c := f.get(), f.get(), f.get()
	if made != 3 {
		t.Fatalf("made %d buffers for 3 gets of an empty list, want 3", made)
	}
	f.put(a)
	f.put(b)
	f.put(c) // full: dropped
	runtime.GC()
	runtime.GC()
	if x, y := f.get(), f.get(); x != a || y != b || made != 3 {
		t.Fatalf("after two collections got %p %p, want %p %p, made %d", x, y, a, b, made)
	}
	if f.get(); made != 4 {
		t.Fatalf("an empty list made %d buffers in all, want 4", made)
	}
}
