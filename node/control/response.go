package control

// Response is one message from the node. Exactly one of: Error set (the
// request failed; Key names the field at fault when one is), Loader set
// (open_loader), Stats set (stats), or neither (close_loader succeeded).
type Response struct {
	Error string `json:"error,omitempty"`
	Key   string `json:"key,omitempty"`
	// KVCode is the parameter server's code of the error (kv's wire
	// codes: 10 a table spec that differs from the existing table's,
	// ...), when a kv request failed there.
	KVCode uint16      `json:"kv_code,omitempty"`
	Loader *LoaderInfo `json:"loader,omitempty"`
	Stats  *Stats      `json:"stats,omitempty"`
	// KVTable answers kv_create, KVSave kv_save, KVDrop kv_drop.
	KVTable *TableInfo `json:"kv_table,omitempty"`
	KVSave  *SaveInfo  `json:"kv_save,omitempty"`
	KVDrop  *DropInfo  `json:"kv_drop,omitempty"`
}

// LoaderInfo describes an opened loader: where its ring is and what the
// trainer will read from it.
type LoaderInfo struct {
	LoaderID uint64 `json:"loader_id"`
	Ring     string `json:"ring"`      // path of the ring file
	SubRings int    `json:"sub_rings"` // W: batch i of an epoch is in sub-ring i mod W
	// RingSize is the ring's total record space; SubRingSize one sub-ring's.
	RingSize    int64 `json:"ring_size"`
	SubRingSize int64 `json:"sub_ring_size"`
	// MaxRecord is the worst-case size of one batch record in bytes.
	MaxRecord int64 `json:"max_record"`
	// NumSeeds is this rank's seed count per epoch; BatchesPerEpoch the
	// batches it makes of them (drop_last applied).
	NumSeeds        int64 `json:"num_seeds"`
	BatchesPerEpoch int64 `json:"batches_per_epoch"`
	Epochs          int   `json:"epochs"`
	BatchSize       int   `json:"batch_size"`
	Fanouts         []int `json:"fanouts"`
	Concurrency     int   `json:"concurrency"`
	// FeatDim is the feature width (0 when features are off or absent),
	// XDtype "float32" or "float16" ("" without features).
	FeatDim int    `json:"feat_dim"`
	XDtype  string `json:"x_dtype"`
	// LabelDim is the label width per seed (0 when labels are off).
	LabelDim   int `json:"label_dim"`
	NumClasses int `json:"num_classes"`
	// Part is the partition this node serves, NumParts the set's size.
	Part     int `json:"part"`
	NumParts int `json:"num_parts"`
	// TotalNodes is the whole graph's node count (every part): the most
	// nodes a batch can hold, whatever its fanouts (node train bounds
	// its buffers with it). 0 from a node of an earlier build.
	TotalNodes uint64 `json:"total_nodes,omitempty"`
}

// Stats is the node's state: its loaders and their samplers.
type Stats struct {
	Node    string        `json:"node"`
	PID     int           `json:"pid"`
	Part    int           `json:"part"`
	Nodes   int64         `json:"nodes"` // owned nodes
	Edges   int64         `json:"edges"` // stored edges
	Uptime  float64       `json:"uptime_s"`
	Loaders []LoaderStats `json:"loaders"`
	Opened  uint64        `json:"loaders_opened"` // since start
	Batches uint64        `json:"batches"`        // written, all loaders since start
	// SampledEdges: edges of the batches this node's samplers wrote,
	// all loaders since start (relayed loaders' are their sampling
	// node's).
	SampledEdges uint64 `json:"sampled_edges"`
	Failures     uint64 `json:"sampler_failures"`
	// Ready: the node serves and every configured peer has answered the
	// mesh handshake (always true without a mesh).
	Ready bool       `json:"ready"`
	Mesh  *MeshStats `json:"mesh,omitempty"` // nil without a mesh
	// Checksum is the partition-set checksum of the graph.toml the node
	// serves, with or without a mesh (mesh.checksum, the same, is absent
	// without one); absent from the answers of nodes built before it.
	Checksum string `json:"checksum,omitempty"`
	// Cache counts feature rows of nodes owned elsewhere that this node's
	// samplers needed: served from the part file's cache section (hits)
	// or pulled from a peer (misses). CacheRows is the cache's size.
	CacheRows   int    `json:"cache_rows"`
	CacheHits   uint64 `json:"cache_hits"`
	CacheMisses uint64 `json:"cache_misses"`
	// KV is this node's parameter server; nil on a client node (it holds
	// no shard) and from a node of an earlier build.
	KV *KVStats `json:"kv,omitempty"`
}

// KVStats is a sampling node's parameter server, as a trainer needs to
// know it before it trains.
type KVStats struct {
	// CheckpointDir is [kv] checkpoint_dir, where kv_save writes; "" when
	// it is not set, and a kv_save fails.
	CheckpointDir string `json:"checkpoint_dir"`
	// Tables are the tables this node holds a shard of, by name: [] when
	// none (so that `node kv list --json | jq '.tables[]'` works), absent
	// from the answers of nodes built before them.
	Tables []KVTableStats `json:"tables"`
}

// KVTableStats is a table of a node's parameter server and the node's
// shard of it: `node kv list`.
type KVTableStats struct {
	Name      string `json:"name"`
	Rows      uint64 `json:"rows"`
	Dim       int    `json:"dim"`
	Mode      string `json:"mode"`      // async or sync
	Optimizer string `json:"optimizer"` // as its spec words it: "adagrad lr 0.1"
	// ShardLo and ShardHi bound the rows of this node's shard, [lo, hi).
	ShardLo uint64 `json:"shard_lo"`
	ShardHi uint64 `json:"shard_hi"`
	Version uint64 `json:"version"` // the shard's synchronous steps or pushes applied
	// Checkpoint is the file the shard's rows were last loaded from
	// (Loaded) or saved to; "" when neither: its initial rows, and what
	// training has changed of them.
	Checkpoint string `json:"checkpoint,omitempty"`
	Loaded     bool   `json:"loaded,omitempty"`
	Changed    bool   `json:"changed"` // an update applied since (or since it was made)
}

// MeshStats is the node's place in the cluster and its traffic per peer.
type MeshStats struct {
	Listen   string      `json:"listen"` // bound UDP address
	Cluster  string      `json:"cluster"`
	Checksum string      `json:"checksum"` // partition-set checksum (graph.toml)
	Peers    []PeerStats `json:"peers"`    // configured peers by part, then any other caller
}

// PeerStats is one peer: In counts the requests this node served for it
// (the peer's node and samplers), Out the calls this node and its
// samplers made to it.
type PeerStats struct {
	Part  int          `json:"part"` // -1: a caller that serves no configured part
	Name  string       `json:"name"`
	Addr  string       `json:"addr"`
	Ready bool         `json:"ready"` // answered the handshake
	In    TrafficStats `json:"in"`
	Out   TrafficStats `json:"out"`
}

// TrafficStats are counters of one direction. Latency quantiles are the
// upper bounds of histogram buckets (1-2-5 steps); Out's are the largest
// reported by the node and its live samplers.
type TrafficStats struct {
	Requests      uint64  `json:"requests"`
	Errors        uint64  `json:"errors"`
	BytesSent     uint64  `json:"bytes_sent"`
	BytesReceived uint64  `json:"bytes_received"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
}

// LoaderStats is one open loader.
type LoaderStats struct {
	LoaderID uint64         `json:"loader_id"`
	Ring     string         `json:"ring"`
	Batches  uint64         `json:"batches"` // batch records written, all workers
	Samplers []SamplerStats `json:"samplers"`
	// SubRingSize is each sub-ring's capacity and RingUsed its bytes
	// written and not yet released by the trainer, per sub-ring: a ring
	// that stays full waits on the trainer, one that stays empty on the
	// samplers.
	SubRingSize int64   `json:"sub_ring_size"`
	RingUsed    []int64 `json:"ring_used"`
}

// SamplerStats is one sampler subprocess.
type SamplerStats struct {
	Worker  int    `json:"worker"`
	PID     int    `json:"pid"`
	State   string `json:"state"`  // running | done | failed | killed (node/proc.go)
	Status  string `json:"status"` // exit status once exited, like "exit status 1" or "signal: killed"
	Batches uint64 `json:"batches"`
	Epoch   int    `json:"epoch"` // epoch in progress
}
