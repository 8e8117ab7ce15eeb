// Package sample draws deterministic multi-hop neighbour samples, builds
// mini-batches with the semantics of PyG's NeighborLoader, and encodes
// them as the batch record that trainers read from the ring (DESIGN.md §5).
//
// # Contract
//
// A sampler process (node sampler) does, per loader:
//
//  1. Open its partition (csr.Open) and adapt it: FromCSR. For a
//     single-process loader over all partitions, wrap them in NewUnion.
//  2. Build a Plan from the split's seed ids and PlanOptions (rank, world
//     size, batch size, shuffle, drop_last, seed).
//  3. Make one Sampler per goroutine with New(Config): fanouts, the Local
//     partition, and for a cluster a Remote and the Book; FeatureSource and
//     LabelSource (LocalSource serves a Partition; node/ composes cache and
//     mesh pulls behind the same interfaces).
//  4. Per epoch e: ep := plan.Epoch(e, buf). Worker w of W takes batches
//     b = w, w+W, …: s.Sample(ctx, ep.Key(b), ep.Batch(b)), then either
//     s.Gather + EncodedSize + Encode, or EncodedSize + EncodeGather
//     (features go straight into the ring record). After the last batch a
//     worker writes EncodeControl(KindEndOfEpoch); on failure KindError; at
//     shutdown KindEndOfStream.
//
// A peer's mesh server answers a NeighborRequest by calling SampleNeighbors
// on its own partition: the same function the Sampler calls for its local
// nodes, so a node's sample does not depend on who draws it.
//
// Concurrency: Plan, Mem, Union, CSR and LocalSource are safe for
// concurrent use. A Sampler, a Batch it returned, a NeighborResponse and a
// Chooser are not: each belongs to one goroutine. Remote implementations
// must be safe for concurrent use (a Sampler asks several peers at once).
//
// # Determinism
//
// Every random choice for node v at hop k of batch b is drawn from
// splitmix64 seeded with NodeStream(BatchKey{Seed, Epoch, Rank, b}.Stream(),
// k, v): a counter-based generator keyed by (seed, epoch, rank, b, k, v).
// Uniform sampling is Floyd's algorithm over v's sorted neighbour list;
// weighted sampling keeps the fanout largest Efraimidis–Spirakis keys
// u_i^(1/w_i) with u_i draw i. Chosen neighbours are emitted ascending. A
// batch is therefore a pure function of the loader's seed, epoch, rank,
// batch index, seeds and the graph: it is byte-identical whatever the
// number of workers, their order, the concurrency, or which host expanded
// which node. The frontier is merged in frontier order (then neighbour
// order), which fixes n_id and edge_index.
//
// # Batch semantics
//
// n_id lists the seeds in the given order (duplicate seeds are an error),
// then the nodes first reached at hop 1 in order of discovery, hop 2, …
// Only nodes new at hop k−1 are expanded at hop k. Every sampled neighbour
// adds one edge, also when the neighbour was already in n_id. edge_index
// row = the neighbour's position, col = the expanded node's position.
// num_sampled_nodes has hops+1 entries (seeds first), num_sampled_edges
// has hops entries. x holds the features of n_id; y the labels of the
// seeds (LabelDim int64 columns each, -1 = missing).
//
// A link batch (SampleLink, link.go) takes seed edges instead: its seeds
// are the edges' endpoints and negatives, once each in order of first
// appearance, sampled as above (with LinkOptions.Exclude, the edges
// between a seed edge's ends, either direction, are left out of the
// graph before the draw, as DGL's as_edge_prediction_sampler(exclude=...)
// does: a seed gets min(fanout, its other neighbours) of them, and a
// Remote request carries the exclusions of its nodes, NeighborRequest.
// Exclude, so that the peer draws the same; only hop 0 expands seeds,
// so only its requests carry any), and it adds the pairs to score:
// edge_label_index (positions
// in n_id: the seed edges, then each one's NegRatio negatives (its
// source, a uniform node drawn from NodeStream(batch, MaxHops, i))) and
// edge_label (1, then 0).
//
// # Record layout
//
// A record is little-endian and starts at a 64-byte aligned address (the
// ring guarantees it). Offsets are from the record start.
//
//	offset  width  field
//	     0      4  magic "GNBR" (47 4E 42 52)
//	     4      2  major version, 1 (readers refuse any other)
//	     6      2  minor version, 1 (readers accept any; 0 has no link sections)
//	     8      4  kind: 1 batch, 2 end of epoch, 3 error, 4 end of stream
//	    12      4  hops H
//	    16      8  record length in bytes (a multiple of 64)
//	    24      8  epoch
//	    32      8  batch index in the epoch (end of epoch: batches in it)
//	    40      8  batch_size B (seeds: n_id[:B], rows of y)
//	    48      8  num nodes N
//	    56      8  num edges E
//	    64      4  feat dim D
//	    68      4  x dtype: 0 float32, 1 float16
//	    72      4  label dim L
//	    76      4  pairs P of a link batch (minor 0: reserved, 0)
//	    80    144  section table: 9 × (offset u64, length u64), in order
//	               0 n_id, 1 edge_index, 2 num_sampled_nodes,
//	               3 num_sampled_edges, 4 x, 5 y, 6 message,
//	               7 edge_label_index, 8 edge_label (minor 0: 7 entries,
//	               the last two reserved, 0)
//	   224     28  reserved, 0
//	   252      4  CRC-32C (Castagnoli) of bytes [0, 252)
//	   256         sections, each at a multiple of 64, zero padding between
//
//	section            dtype    shape     length in bytes
//	n_id               int64    (N,)      8N
//	edge_index         int64    (2, E)    16E: all E rows, then all E cols
//	num_sampled_nodes  int64    (H+1,)    8(H+1)   (batch records only)
//	num_sampled_edges  int64    (H,)      8H       (batch records only)
//	x                  f32|f16  (N, D)    N·D·(4|2), row-major
//	y                  int64    (B, L)    8·B·L, row-major; -1 = missing
//	message            utf-8    —         error records only, ≤ 4096
//	edge_label_index   int64    (2, P)    16P: all P sources, then all P destinations
//	edge_label         float32  (P,)      4P
//
// Control records (kinds 2–4) have every count, dim and dtype zero and
// every section empty except the message of an error record. Readers take
// each section's place from the table, check it against the counts, and
// may then view it in place (torch.frombuffer with offset and count, then
// view(2, E) for edge_index, view(N, D) for x, view(B, L) for y).
// Writers place sections in table order at the next multiple of 64
// (Header.Layout); readers must not assume more than the table says.
//
// Sections carry no checksum: a record lives in local shared memory and
// is published whole by the ring, and a CRC over the feature block would
// cost more than gathering it. The header CRC catches a reader that looks
// at the wrong offset.
//
// testdata/batch_v1.bin is one such record (3 seeds, 2 hops) and
// testdata/batch_v1.json its decoded contents, batch_link_v1 a link
// batch; both are regenerated by go test ./sample -run Golden -update.
// batch_v1_0 is a record of minor version 0, kept to show it decodes.
package sample
