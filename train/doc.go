// Package train holds the built-in trainers: GraphSAGE node
// classification (PyG's SAGEConv with mean aggregation and
// a root weight; 2 or 3 layers, ReLU, dropout, softmax cross-entropy,
// Adam), written on gonum's BLAS with a hand-written backward pass. It
// reads batches exactly as an external trainer does: decoded batch
// records (sample.View) from the ring, through a Batches source.
//
// # Contract
//
// The caller (cmd/node's train command, or a test) does, on every host:
//
//  1. Build a Config (DefaultConfig, then FeatDim and Classes from the
//     graph; the same for every trainer but Rank) and a Sync: NoSync for
//     one trainer, NewLocalSync for trainers in one process, the kv
//     table's synchronous all-reduce across hosts. Size that table with
//     Trainer.SyncLen.
//  2. New(cfg, sync): parameters are initialised from cfg.Seed, so every
//     trainer starts from the same ones.
//  3. Open three loaders on the local node (node/client): train (the
//     rank's share of the train split, shuffled, cfg.Epochs epochs,
//     fanouts with at least cfg.Layers hops), val and test (no shuffle,
//     cfg.Evaluations() epochs; fanouts -1 for exact neighbourhoods).
//     Wrap each in BatchesFunc, mapping client.ErrEndOfEpoch to
//     ErrEndOfEpoch.
//  4. Run(ctx, Data{Train, Val, Test}, report): report gets an EpochStats
//     per epoch (log it: it is a slog.LogValuer). On an error of one
//     trainer, the others fail too (the failure travels in the next sync
//     round), so no trainer waits forever; a trainer whose own context
//     ends leaves, and a Sync must then fail the others.
//
// # Data-parallel training
//
// Each round every trainer computes the gradient of the summed loss of
// its next batch, appends its loss, correct and labelled-seed counts and
// an "active" flag, and all-reduces that vector (mean). The averaged
// gradient divided by the averaged count is the gradient of the mean loss
// over every trainer's seeds, whatever the number of trainers and however
// uneven their batches. Every trainer then applies the same Adam step, so
// parameters stay bit-identical. A trainer whose epoch is over keeps
// joining rounds with zeros until no trainer is active: trainers may have
// different batch counts per epoch. Evaluation takes one more round per
// epoch for the val and test counts, so accuracies are over all trainers.
// Rounds are numbered 0, 1, 2, … (the step of Sync.AllReduce).
//
// # The model
//
// Layer l maps its input rows H to O[t] = mean_{j∈N(t)} H[j]·W_l + H[t]·W_r
// + b, with ReLU and dropout between layers (dropout on the features is
// InputDropout, on hidden layers Dropout; masks are a pure function of
// seed, rank, epoch, batch and layer). As PyG's trim_to_layer does, layer
// l only computes the nodes within L−1−l hops of the seeds, from the
// edges of the first L−l hops (num_sampled_nodes / num_sampled_edges);
// hops beyond L are ignored. Each layer picks, per batch, whether to
// aggregate then project or project then aggregate, by counting
// multiply-adds. Features with few non-zeros (bag-of-words) are kept in
// compressed rows for the first layer. Aggregation splits feature columns
// over Config.Threads goroutines; dense products go to gonum's BLAS,
// which splits them over GOMAXPROCS. Results do not depend on the number
// of threads.
//
// Parameters form one float32 vector, layer by layer: W_l (d_in × d_out,
// row-major), W_r (same), b (d_out).
//
// # Knowledge-graph embeddings
//
// KGE trains DGL-KE's models (kge_model.go: TransE with L1 or L2
// distance, DistMult, ComplEx, RotatE, RESCAL, SimplE, TransR; scores,
// higher is more plausible, and their gradients written by hand) on
// embeddings held in a parameter server (KGEParams: kv.Client, or
// node/client.KV through a node). The caller (cmd/node's kge command, or
// a test) does, on every host:
//
//  1. Build a KGEConfig (DefaultKGEConfig, then the graph's Entities and
//     Relations, Rank and World, StepsPerEpoch the same on every trainer).
//  2. Create the two asynchronous tables with KGETableDims's widths, the
//     uniform initialisation ±(gamma+2)/hidden (kv.KGEInitScale) and
//     Adagrad: the owners apply the pushed gradients. For a model with a
//     projection table (transr), the third, ProjectionTable, of
//     KGEProjectionDim's width and ±KGEProjectionInitScale.
//  3. NewKGE(cfg, params, sync) with a Sync of KGESyncLen values, and
//     Run(ctx, KGEData{Train: the part's triples, Eval, Filter}, report).
//
// A step takes BatchSize positives (a fresh shuffle per pass), splits them
// into chunks of NegSize that share NegSize entities drawn uniformly
// (under NegDeg also the chunk's own heads or tails, DGL-KE's
// degree-proportional negatives, each positive's own masked to a score
// of 0), corrupts tails on even steps and heads on odd ones, pulls every
// distinct row once, computes DGL-KE's loss −(mean log σ(pos) + mean over
// positives of the negatives' mean (or self-adversarially weighted sum)
// of log σ(−neg))/2 plus RegCoef·Σ|x|^RegNorm over the rows as DGL-KE
// gathers them (the positives' distinct entities, every negative drawn,
// a relation once per positive triple), and pushes one gradient per
// distinct row. Trainers do not wait for each
// other between steps (Hogwild, as DGL-KE); each epoch ends with one
// all-reduce of the loss, a barrier after which every trainer's pushes
// are in, and, when it evaluates, one more of the metric sums (as
// base-256 digits, which no float32 reduction rounds: kge_metrics.go): every
// trainer ranks its share (every World-th triple from Rank) of
// Eval, heads and tails, against every entity, with the whole tables
// pulled, and leaves out the known facts of Filter (filtered ranks); or,
// under EvalNeg, against that many entities drawn per block of EvalBlock
// triples (plus, under EvalNegDeg, the block's own true entities, raw
// ranks only), pulling only the block's rows.
//
// # Concurrency
//
// A Trainer and a KGE belong to one goroutine; a KGEFilter may be shared
// once built. NoSync and the Syncs of
// NewLocalSync are safe for the use described (one goroutine per rank).
// A View handed to the trainer is read until the next Next call, never
// written.
package train
