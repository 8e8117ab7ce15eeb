package shm

import (
	"context"
	"errors"
	"runtime/debug"
	"sync/atomic"
	"testing"
)

// TestCommitAfterRingClose: a reservation made before the Ring's Close
// is committed after it. Commit must answer ErrOrder, not write the
// record's length into the unmapped area (a fault; fatal to the process
// without SetPanicOnFault).
func TestCommitAfterRingClose(t *testing.T) {
	r := newTestRing(t, 1, 4096)
	p, err := r.Producer(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Reserve(context.Background(), 100); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	var cerr error
	func() {
		defer func() {
			if x := recover(); x != nil {
				t.Fatalf("Commit after the Ring's Close faulted: %v", x)
			}
		}()
		cerr = p.Commit(100)
	}()
	if !errors.Is(cerr, ErrOrder) {
		t.Fatalf("Commit after the Ring's Close: %v, want ErrOrder", cerr)
	}
}

// TestConsumerAttachFailureGivesClaimsBack: the second sub-ring's
// counters are corrupt, so Consumer fails; the claim it made on the
// first sub-ring must be given back (state none, no pid), or producers
// would wait on a consumer that never reads and a retry would read busy.
func TestConsumerAttachFailureGivesClaimsBack(t *testing.T) {
	r := newTestRing(t, 2, 4096)
	atomic.StoreUint64(r.u64(1, ctlWrite), 7) // corrupt after Open's check
	if _, err := r.Consumer(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Consumer on a corrupt sub-ring: %v, want ErrCorrupt", err)
	}
	for w := range 2 {
		if st, pid := atomic.LoadUint32(r.u32(w, ctlConsState)), atomic.LoadUint32(r.u32(w, ctlConsPID)); st != StateNone || pid != 0 {
			t.Errorf("sub-ring %d after a failed attach: consumer state %d pid %d, want %d and 0", w, st, pid, StateNone)
		}
	}
	atomic.StoreUint64(r.u64(1, ctlWrite), 0) // repaired: attaching works
	c, err := r.Consumer()
	if err != nil {
		t.Fatalf("Consumer after the repair: %v", err)
	}
	c.Close()
}

// TestProducerAttachFailureGivesClaimBack: the same for Producer, which
// claims the sub-ring before it checks the counters; a claim left open
// without a heartbeat would read as a dead producer, not a corrupt ring.
func TestProducerAttachFailureGivesClaimBack(t *testing.T) {
	r := newTestRing(t, 1, 4096)
	atomic.StoreUint64(r.u64(0, ctlRead), 7)
	if _, err := r.Producer(0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Producer on a corrupt sub-ring: %v, want ErrCorrupt", err)
	}
	if st, pid := atomic.LoadUint32(r.u32(0, ctlProdState)), atomic.LoadUint32(r.u32(0, ctlProdPID)); st != StateNone || pid != 0 {
		t.Fatalf("after a failed attach: producer state %d pid %d, want %d and 0", st, pid, StateNone)
	}
}
