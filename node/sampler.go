package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"graphnode/csr"
	"graphnode/mesh"
	"graphnode/partition"
	"graphnode/sample"
	"graphnode/shm"
)

// Tunables of a sampler process.
const (
	// stopGrace: after SIGTERM, batches in hand may take this long to
	// reach the ring before the sampler gives up on them.
	stopGrace = 2 * time.Second
	// finalWait bounds the writing of the last record (end of stream or
	// error) into a ring the trainer may no longer drain.
	finalWait = time.Second
	// progressEvery is how often progress lines go to the node.
	progressEvery = 100 * time.Millisecond
)

// errStopped: the sampler was told to stop before its last batch.
var errStopped = errors.New("node: sampler stopped")

// RunSampler is the body of `node sampler`: it produces spec's share of
// the loader's batches into sub-ring spec.Worker, in batch order, with
// spec.Options.Concurrency batches in flight. When ctx is cancelled
// (SIGTERM) it writes the batches in hand, then end-of-stream, and
// returns nil. A failure is written to the ring as an error record and
// returned, for the caller to report to the node (ReportSamplerError).
// Progress lines go to progress.
func RunSampler(ctx context.Context, spec *SamplerSpec, log *slog.Logger, progress io.Writer) error {
	ring, err := shm.Open(spec.Ring)
	if err != nil {
		return err // the node claims the sub-ring and reports our exit
	}
	defer ring.Close()
	prod, err := ring.Producer(spec.Worker)
	if err != nil {
		return err
	}
	defer prod.Close()
	r := &samplerRun{spec: spec, log: log, prod: prod}
	err = r.setup()
	if err == nil {
		defer r.graph.Close()
		if r.cli != nil {
			defer r.cli.Close()
		}
		stopProgress := r.reportProgress(progress)
		defer stopProgress()
		err = r.run(ctx)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, shm.ErrConsumerGone):
		log.Info("trainer gone, sampler exits", "err", err)
		return nil
	case errors.Is(err, errStopped), ctx.Err() != nil && errors.Is(err, context.Canceled):
		log.Info("sampler stopped", "epoch", r.epoch.Load(), "batches", r.batches.Load())
		return r.final(sample.KindEndOfStream, "")
	}
	// The trainer's client names the loader and worker the record came
	// from; the record says what failed ("worker 0: worker 0: …" before).
	if ferr := r.final(sample.KindError, err.Error()); ferr != nil {
		log.Warn("could not write error record", "err", ferr)
	}
	return err
}

// samplerRun is one sampler process's state.
type samplerRun struct {
	spec  *SamplerSpec
	log   *slog.Logger
	prod  *shm.Producer
	graph *csr.Graph
	part  *sample.CSR
	plan  *sample.Plan
	cfg   sample.Config
	cli   *mesh.Client   // nil with a single part
	src   *clusterSource // nil with a single part
	link  sample.LinkOptions

	batches atomic.Uint64
	edges   atomic.Uint64 // of the batches written
	epoch   atomic.Int64
	index   uint64 // batches written this epoch (for the record of a failure)
}

// setup maps the partition (shared page cache: no copy) and builds the
// plan, exactly as the node did when it described the loader.
func (r *samplerRun) setup() error {
	g, err := openPart(r.spec)
	if err != nil {
		return err
	}
	part, err := sample.FromCSR(g)
	if err == nil {
		r.graph, r.part = g, part
		err = r.read(r.plans) // the split's mask, the cache ids
	}
	if err != nil {
		g.Close()
		r.graph = nil
	}
	return err
}

// openPart maps the node's partition file: the descriptor the node
// handed down (spec.PartFD), or spec.Part by path. A file that is not the
// one the node opened and checked (spec.PartID: another inode, or the same
// rewritten in place) is refused. Reopened by path, a partition directory
// replaced under the running node (node partition --force to the same
// path) gave samplers the new graph while the node described the old one:
// other loader sizes and node-data answers, and, with another train split,
// an epoch ending where the trainer wanted a batch.
func openPart(spec *SamplerSpec) (*csr.Graph, error) {
	var g *csr.Graph
	var err error
	if spec.PartFD > 0 {
		g, err = csr.OpenFile(os.NewFile(uintptr(spec.PartFD), spec.Part), csr.OpenOptions{})
	} else {
		g, err = csr.Open(spec.Part, csr.OpenOptions{})
	}
	replaced := func(why error) error {
		return fmt.Errorf("node: sampler: %s is not the partition file the node opened and checked: it was replaced or rewritten since the node started (%w); restart the node to serve the new partition",
			spec.Part, why)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, csr.ErrCorrupt), errors.Is(err, csr.ErrVersion), errors.Is(err, csr.ErrChanged):
		return nil, replaced(err) // the node opened it, valid
	case err != nil:
		return nil, err
	}
	if id := g.Identity(); id != spec.PartID {
		g.Close()
		return nil, replaced(fmt.Errorf("%v now, %v when the node opened it", id, spec.PartID))
	}
	return g, nil
}

// read runs f, which reads the mapped partition, through csr.Graph.Read:
// a file truncated or rewritten under the sampler is an error that says
// what to do, which the trainer reads in the error record, not a SIGBUS
// that kills the sampler with no word of the file.
func (r *samplerRun) read(f func() error) error { return changedPart(r.graph.Read(f)) }

func (r *samplerRun) plans() error {
	o := r.spec.Options
	seeds := r.spec.Seeds
	if seeds == nil {
		var err error
		if seeds, err = loaderSeeds(r.graph, o); err != nil {
			return err
		}
	}
	var err error
	if r.plan, err = sample.NewPlan(seeds, planOptions(o)); err != nil {
		return err
	}
	schema, err := loaderSchema(r.graph, o)
	if err != nil {
		return err
	}
	r.link = sample.LinkOptions{NegRatio: o.NegRatio, NumNodes: r.graph.Meta().TotalNodes, Exclude: o.ExcludeSeedEdges}
	var feats sample.FeatureSource
	var labels sample.LabelSource
	r.cfg = sample.Config{Fanouts: o.Fanouts, Local: r.part, Schema: schema}
	if r.spec.Mesh == nil {
		src := sample.NewLocalSource(r.part)
		feats, labels = src, src
	} else {
		if err := r.dial(); err != nil {
			return err
		}
		feats, labels = r.src, r.src
		r.cfg.Remote, r.cfg.Book = newMeshRemote(r.cli, r.src.book), r.src.book
	}
	if schema.FeatDim > 0 {
		r.cfg.Features = feats
	}
	if schema.LabelDim > 0 {
		r.cfg.Labels = labels
	}
	return r.cfg.Validate()
}

// dial makes the sampler's mesh client (the node's identity, from the
// spec; each sampler has its own connections) and its cluster feature
// source. The identity is the one the node loaded, not the files: read
// at each sampler's start, files replaced under a running node (a new
// CA copied onto the host before its restart) made every peer refuse
// its new loaders while the node reported itself ready, and a renewed
// certificate showed peers two certificates of one node.
func (r *samplerRun) dial() error {
	m := r.spec.Mesh
	book, err := partition.NewBook(m.Bounds)
	if err != nil {
		return fmt.Errorf("node: sampler spec: mesh.bounds: %w", err)
	}
	id, err := mesh.NewIdentity(m.Node, m.Identity)
	if err != nil {
		return fmt.Errorf("node: sampler spec: mesh.identity (the node's, as it loaded it at its start): %w", err)
	}
	peers := make(map[int]mesh.Peer, len(m.Peers))
	for p, e := range m.Peers {
		peers[p] = mesh.Peer{Name: e.Name, Addr: e.Addr}
	}
	cli, err := mesh.NewClient(mesh.ClientConfig{
		Identity: id, Cluster: m.Cluster, Checksum: m.Checksum, Part: m.Part, Peers: peers,
		Timeout: m.Timeout, Retries: m.Retries, MaxMessage: m.MaxMessage,
	})
	if err != nil {
		return err
	}
	src, err := newClusterSource(r.part, book, cli)
	if err != nil {
		cli.Close()
		return err
	}
	r.cli, r.src = cli, src
	return nil
}

// run writes every epoch's batches of this worker, an end-of-epoch record
// after each epoch and end-of-stream after the last.
func (r *samplerRun) run(ctx context.Context) error {
	// Work continues past ctx's cancellation for stopGrace, so that the
	// batches in hand still reach the ring.
	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stopTimer := context.AfterFunc(ctx, func() { time.AfterFunc(stopGrace, cancel) })
	defer stopTimer()
	samplers := make([]*sample.Sampler, r.spec.Options.Concurrency)
	for i := range samplers {
		s, err := sample.New(r.cfg)
		if err != nil {
			return err
		}
		samplers[i] = s
	}
	var buf []uint64
	for e := range r.spec.Options.Epochs {
		r.epoch.Store(int64(e))
		// A stop ends the stream at an epoch's start too: a worker with
		// no batch in an epoch (batches_per_epoch below W, or 0 with
		// drop_last) never asks epochBatches, and would otherwise write
		// end-of-epoch records until stopGrace cuts it off.
		select {
		case <-ctx.Done():
			return errStopped
		default:
		}
		ep := r.plan.Epoch(uint64(e), buf)
		buf = ep.Order()
		if err := r.epochBatches(work, ctx.Done(), ep, samplers); err != nil {
			return err
		}
		if err := r.control(work, sample.KindEndOfEpoch, uint64(e), uint64(ep.NumBatches()), ""); err != nil {
			return err
		}
	}
	return r.control(work, sample.KindEndOfStream, uint64(r.spec.Options.Epochs), 0, "")
}

// final writes a last record within finalWait. A consumer already gone
// is no failure: the trainer closed its loader first.
func (r *samplerRun) final(k sample.Kind, msg string) error {
	ctx, cancel := context.WithTimeout(context.Background(), finalWait)
	defer cancel()
	err := r.control(ctx, k, uint64(r.epoch.Load()), r.index, msg)
	if errors.Is(err, shm.ErrConsumerGone) {
		return nil
	}
	return err
}

func (r *samplerRun) control(ctx context.Context, k sample.Kind, epoch, index uint64, msg string) error {
	buf, err := r.prod.Reserve(ctx, sample.ControlSize(msg))
	if err != nil {
		return err
	}
	var n int
	err = r.prod.Guard(func() (err error) {
		n, err = sample.EncodeControl(buf, k, epoch, index, msg)
		return err
	})
	if err != nil {
		r.prod.Abandon()
		return err
	}
	return r.prod.Commit(n)
}

// samplerErrorPrefix starts the line of a sampler's failure on its
// progress output (ReportSamplerError).
const samplerErrorPrefix = "error "

// ReportSamplerError is how `node sampler` reports the error it fails
// with: one line on its progress output w, "error " and err's text as a
// JSON string, written once every other line is (the progress reports
// have stopped). Its node logs it with the exit status, in the node's
// log format; the sampler logs nothing of it. A line cut short (the
// sampler killed mid-write) does not decode, and the node logs the exit
// status alone.
func ReportSamplerError(w io.Writer, err error) error {
	msg, _ := json.Marshal(err.Error()) // a string always encodes
	line := make([]byte, 0, len(samplerErrorPrefix)+len(msg)+1)
	line = append(append(append(line, samplerErrorPrefix...), msg...), '\n')
	_, werr := w.Write(line)
	return werr
}

// changedLines writes a report line only when it differs from the last
// one it wrote.
type changedLines struct{ last []byte }

// write writes line to w unless it is the last line written. Any counter
// counts: a change seen by requests and cache reads alone missed an
// error or bytes counted after its request (an answer that failed to
// decode), and when no request followed, as when the sampler then
// failed, the node never counted them.
func (c *changedLines) write(w io.Writer, line []byte) {
	if !bytes.Equal(line, c.last) {
		w.Write(line)
		c.last = line
	}
}

// reportProgress prints "progress <batches> <epoch> <edges>" lines to w
// while the sampler runs, and once more when the returned func is called.
func (r *samplerRun) reportProgress(w io.Writer) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	last := [3]int64{-1, -1, -1}
	var meshLines changedLines
	print := func() {
		cur := [3]int64{int64(r.batches.Load()), r.epoch.Load(), int64(r.edges.Load())}
		if cur != last {
			fmt.Fprintf(w, "progress %d %d %d\n", cur[0], cur[1], cur[2])
			last = cur
		}
		if r.src != nil {
			meshLines.write(w, r.src.report().line())
		}
	}
	wg.Go(func() {
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				print()
				return
			case <-t.C:
				print()
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
