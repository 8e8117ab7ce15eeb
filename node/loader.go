package node

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"graphnode/node/control"
	"graphnode/sample"
	"graphnode/shm"
)

// loader is one trainer's open loader: a ring file and its W samplers.
type loader struct {
	id    uint64
	info  control.LoaderInfo
	ring  *shm.Ring
	procs []*proc
	once  sync.Once
	// remote is set (under Node.mu) when a peer opened the loader
	// (server-client mode, remote_loader.go).
	remote *remoteLoader
	// relay is set (under Node.mu) on a client node: the loader's
	// records come from a sampling node (relay.go).
	relay *relay
}

// openLoader validates o against this partition, creates the ring and
// starts the samplers. Errors are *control.Error naming the field at fault.
func (n *Node) openLoader(ctx context.Context, o control.LoaderOptions) (*loader, error) {
	if o.Workers == 0 {
		o.Workers = n.cfg.Samplers.Workers
	}
	if o.Concurrency == 0 {
		o.Concurrency = n.cfg.Samplers.Concurrency
	}
	if o.RingSize == "" {
		o.RingSize = n.cfg.Rings.Size
	}
	info, seeds, err := n.describe(ctx, o)
	if err != nil {
		return nil, err
	}
	ringBytes, _ := shm.ParseSize(o.RingSize) // DecodeRequest or Validate checked it
	sub := ringBytes / int64(o.Workers) / shm.PageSize * shm.PageSize
	// A sub-ring must hold the largest batch record and the largest error
	// record: a sampler's error that does not fit reaches the trainer as a
	// dead producer, without its message.
	batch := roundUp(info.MaxRecord, shm.LineSize)
	if need := shm.RecordHeaderSize + max(batch, maxControlRecord); sub < need || sub < shm.MinCapacity {
		lower := "workers" // an error record's size does not depend on the batch
		if batch > maxControlRecord {
			lower = "batch_size"
		}
		return nil, &control.Error{Key: "ring_size", Msg: fmt.Sprintf(
			"%s gives %s per sub-ring for %d workers, but one batch record can take up to %s (fanouts %v, batch_size %d, feat_dim %d) "+
				"and an error record up to %s: raise ring_size to at least %s or lower %s",
			o.RingSize, shm.FormatSize(sub), o.Workers, shm.FormatSize(info.MaxRecord), o.Fanouts, o.BatchSize, info.FeatDim,
			shm.FormatSize(maxControlRecord),
			// Sub-rings are whole pages: the least that works.
			shm.FormatSize(roundUp(max(need, shm.MinCapacity), shm.PageSize)*int64(o.Workers)), lower)}
	}

	l, err := n.reserveLoader()
	if err != nil {
		return nil, err
	}
	err = n.startLoader(ctx, l, o, info, seeds, ringBytes)
	n.doneStarting(l, err)
	if err != nil {
		return nil, err
	}
	n.opened.Add(1)
	n.log.Info("loader opened", "loader", l.id, "ring", l.info.Ring, "workers", o.Workers,
		"batches_per_epoch", info.BatchesPerEpoch, "epochs", o.Epochs, "rank", o.Rank, "world_size", o.WorldSize)
	return l, nil
}

// maxLoadersRefusal is in the error of a loader refused at
// samplers.max_loaders; a client node retries such a refusal of a
// sampling node it has just closed a loader on (startRelay).
const maxLoadersRefusal = "samplers.max_loaders = "

// reserveLoader takes a loader slot and id, unless the node is stopping
// or serves samplers.max_loaders already. The caller fills the loader in
// (startLoader, startRelay), then calls doneStarting.
func (n *Node) reserveLoader() (*loader, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.mu.draining:
		return nil, errStopping()
	case len(n.mu.loaders) >= n.cfg.Samplers.MaxLoaders:
		return nil, &control.Error{Msg: fmt.Sprintf("node serves %d loaders already (%s%d)",
			len(n.mu.loaders), maxLoadersRefusal, n.cfg.Samplers.MaxLoaders)}
	}
	n.mu.nextID++
	l := &loader{id: n.mu.nextID}
	n.mu.loaders[l.id] = l // holds the slot; stats skip it until it has started
	n.starting.Add(1)
	return l, nil
}

// doneStarting ends the reservation of l, whose start returned err: a loader
// that did not start gives its slot back. drain waits for every loader
// reserved to get here before it closes the loaders.
func (n *Node) doneStarting(l *loader, err error) {
	if err != nil {
		n.mu.Lock()
		delete(n.mu.loaders, l.id)
		n.signalReleasedLocked()
		n.mu.Unlock()
	}
	n.starting.Done()
}

// errStopping refuses a loader once drain has begun.
func errStopping() error { return &control.Error{Msg: "node is stopping"} }

// ringError is the refusal of an open_loader whose ring could not be
// created: under ring_size when its size is what failed (rings.dir or the
// memory holds too little, or shm refused the size), else naming the
// node's rings.dir (read-only, not the node's to write): a trainer told
// ring_size was at fault lowered it in vain.
func (n *Node) ringError(err error) *control.Error {
	if ringSizeFailed(err) {
		return &control.Error{Key: "ring_size", Msg: err.Error()}
	}
	return &control.Error{Msg: fmt.Sprintf("the node's rings.dir %s: %v", n.cfg.Rings.Dir, err)}
}

// ringSizeFailed reports whether shm.Create failed for the size asked.
func ringSizeFailed(err error) bool {
	for _, e := range []error{shm.ErrNoMemory, shm.ErrInvalid, unix.ENOSPC, unix.EDQUOT, unix.EFBIG, unix.ENOMEM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// startLoader creates l's ring and spawns its samplers; on failure it
// leaves nothing behind. If drain began meanwhile it stops them again and
// refuses: drain does not close a loader still starting (it waits for
// doneStarting), so nothing else would.
func (n *Node) startLoader(ctx context.Context, l *loader, o control.LoaderOptions, info control.LoaderInfo, seeds []uint64, ringBytes int64) error {
	path := filepath.Join(n.cfg.Rings.Dir, shm.Name(RingPrefix, l.id))
	spec := SamplerSpec{
		Part: n.part, PartFD: samplerPartFD, PartID: n.graph.Identity(), CrashFD: SamplerCrashFD, Ring: path, LoaderID: l.id, Workers: o.Workers,
		Options: o, LogLevel: n.cfg.Log.Level, LogFormat: n.cfg.Log.Format,
		Seeds: seeds, Mesh: n.samplerMesh(),
	}
	if seeds != nil {
		spec.Options.SeedIDs = nil // seed_ids, if given, are the seeds: one copy
	}
	// Refused before the ring is made when too large: the last worker's
	// spec is the longest (the most digits). The others are encoded one
	// at a time, as their samplers start: W specs of up to
	// MaxSamplerSpec each are not held at once.
	last, err := encodeSpec(spec, o.Workers-1)
	if err != nil {
		return err
	}
	ring, err := shm.Create(path, n.ringOptions(o.Workers, ringBytes))
	if err != nil {
		n.log.Error("create ring", "loader", l.id, "ring", path, "err", err)
		return n.ringError(err)
	}
	info.LoaderID, info.Ring = l.id, path
	info.SubRings, info.RingSize, info.SubRingSize = o.Workers, ringBytes, ring.Capacity()
	n.mu.Lock()
	l.info, l.ring = info, ring
	n.mu.Unlock()
	procs := make([]*proc, 0, o.Workers)
	abandon := func() {
		for _, p := range procs {
			p.stop(0)
		}
		n.mu.Lock()
		l.ring = nil
		n.mu.Unlock()
		ring.Remove()
	}
	for w := range o.Workers {
		body := last
		if w < o.Workers-1 {
			if body, err = encodeSpec(spec, w); err != nil {
				abandon()
				return err
			}
		}
		p, err := n.startProc(l, w, body)
		if err != nil {
			abandon()
			n.log.Error("start sampler", "loader", l.id, "worker", w, "err", err)
			return &control.Error{Key: "workers", Msg: err.Error()}
		}
		procs = append(procs, p)
	}
	n.mu.Lock()
	stopping := n.mu.draining
	if !stopping {
		l.procs = procs
	}
	n.mu.Unlock()
	if stopping {
		abandon()
		return errStopping()
	}
	return nil
}

// encodeSpec encodes the spec of sampler w. One larger than a sampler
// reads (a split or seed_ids of millions of ids over several parts) is
// refused with the key of the seeds, instead of every sampler failing at
// start.
func encodeSpec(spec SamplerSpec, w int) ([]byte, error) {
	spec.Worker = w
	body, err := spec.Encode()
	if err != nil {
		return nil, &control.Error{Msg: err.Error()}
	}
	if len(body) > MaxSamplerSpec {
		o := spec.Options
		key, what := "split", fmt.Sprintf("split %q has %d seeds over the partition set", o.Split, len(spec.Seeds))
		switch {
		case o.SeedEdges != nil:
			key, what = "seed_edges", fmt.Sprintf("%d seed_edges", len(o.SeedEdges.Src))
		case o.Split == "":
			key, what = "seed_ids", fmt.Sprintf("%d seed_ids", len(spec.Seeds)+len(o.SeedIDs))
		}
		return nil, &control.Error{Key: key, Msg: fmt.Sprintf(
			"%s: too many for one loader (its sampler spec would be %d bytes, a sampler reads at most %d)",
			what, len(body), MaxSamplerSpec)}
	}
	return body, nil
}

// closeLoader stops l's samplers (SIGTERM, then SIGKILL after the drain
// timeout) and removes its ring; a loader a peer opened stops streaming
// to it first, a relayed one stops copying from its sampling node. It is
// idempotent.
func (n *Node) closeLoader(l *loader, why string) {
	l.once.Do(func() {
		n.mu.Lock()
		procs, ring, relay, remote := l.procs, l.ring, l.relay, l.remote
		if remote != nil {
			remote.closing = true // no stream may start now
		}
		n.mu.Unlock()
		if remote != nil {
			remote.stop(why) // its streams end and the node stops consuming first
		}
		var wg sync.WaitGroup
		for _, p := range procs {
			wg.Go(func() { p.stop(n.cfg.DrainTimeoutDuration()) })
		}
		wg.Wait()
		if relay != nil {
			relay.stop()
			n.mu.Lock()
			n.mu.relayClosed[relay.server] = time.Now()
			n.mu.Unlock()
		}
		if ring != nil {
			if err := ring.Remove(); err != nil {
				n.log.Warn("remove ring", "loader", l.id, "ring", ring.Path(), "err", err)
			}
		}
		n.mu.Lock()
		delete(n.mu.loaders, l.id)
		// Its slot is free now: an open_loader waiting in awaitSlot
		// takes it, not after the whole release this close is part of
		// (a hung-up trainer's other loaders) or drain_timeout.
		n.signalReleasedLocked()
		n.mu.Unlock()
		var batches uint64
		for _, p := range procs {
			batches += p.batches.Load()
		}
		if relay != nil {
			batches = relay.batches.Load()
		}
		n.log.Info("loader closed", "loader", l.id, "reason", why, "batches", batches)
	})
}

// started reports whether l has its samplers or its relay: a loader
// reserved and still starting (its ring, a peer's answer or its samplers
// yet to come) is not open yet. n.mu must be held.
func (l *loader) started() bool { return l.procs != nil || l.relay != nil }

// stats snapshots l; n.mu must be held.
func (l *loader) stats() control.LoaderStats {
	s := control.LoaderStats{LoaderID: l.id, Ring: l.info.Ring, Samplers: []control.SamplerStats{}}
	for _, p := range l.procs {
		ps := p.stats()
		s.Batches += ps.Batches
		s.Samplers = append(s.Samplers, ps)
	}
	if l.relay != nil {
		s.Batches = l.relay.batches.Load()
	}
	if l.ring != nil {
		s.SubRingSize = l.ring.Capacity()
		s.RingUsed = make([]int64, l.ring.SubRings())
		for w := range s.RingUsed {
			s.RingUsed[w] = l.ring.Used(w)
		}
	}
	return s
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }

// maxControlRecord is the largest control record (an error with a message
// of sample.MaxMessage bytes) a sampler or a relay writes on a sub-ring.
const maxControlRecord = (sample.HeaderSize + sample.MaxMessage + sample.Align - 1) / sample.Align * sample.Align
