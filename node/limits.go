package node

import (
	"graphnode/node/control"
	"graphnode/sample"
	"graphnode/shm"
)

// The ring sizes a node refuses, for a command that starts nodes or asks
// them for loaders (node demo, node train) to refuse them first: node
// demo generated, partitioned and started its cluster before a node
// refused its --ring-size.

// MinRingSize is the least ring size of a loader of workers samplers,
// whatever its batches: each of its sub-rings (whole pages) must hold the
// largest error record a sampler writes. Config.Validate refuses a
// rings.size under it for samplers.workers, open_loader a ring_size.
func MinRingSize(workers int) int64 {
	return roundUp(max(shm.RecordHeaderSize+maxControlRecord, shm.MinCapacity), shm.PageSize) * int64(workers)
}

// RingNeed is the least ring_size open_loader accepts for o (o.Workers
// samplers, not 0) from a rank whose share of the seeds is seeds, on a
// partition set of totalNodes nodes whose largest degree is maxDeg (as
// graph.toml records it) and whose batches carry schema's features and
// labels: each sub-ring must hold the largest batch record (maxRecord)
// and the largest error record. An error says a batch of o cannot be a
// record at all.
func RingNeed(o control.LoaderOptions, seeds int, totalNodes uint64, maxDeg int, schema sample.Schema) (int64, error) {
	rec, err := maxRecord(o, seeds, totalNodes, maxDeg, true, schema)
	if err != nil {
		return 0, err
	}
	need := shm.RecordHeaderSize + max(roundUp(rec, shm.LineSize), maxControlRecord)
	return roundUp(max(need, shm.MinCapacity), shm.PageSize) * int64(o.Workers), nil
}
