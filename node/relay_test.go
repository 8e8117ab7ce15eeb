package node_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"graphnode/mesh"
	"graphnode/node/client"
	"graphnode/node/control"
	"graphnode/partition"
)

// TestServerClient: a client node (no part, no samplers) serves trainers
// whose batches the two sampling nodes make: ranks 0 and 1 read exactly
// the batches of one process sampling the union of the part files, as
// they would from the sampling nodes themselves; each rank's loader runs
// on the node of its part; when the trainers close, the sampling nodes
// close their loaders and samplers. Trainers on the client node reach
// the parameter server too: tables created, pushed to and stepped there
// hold exactly the values of one in-process store, read through a
// sampling node as through the client node.
func TestServerClient(t *testing.T) {
	parts, c, socket, ctx := serverClient(t, "10s")
	cl := c.client
	before := links(t, ctx, socket, c.sockets)
	for _, tc := range []struct {
		seed                 uint64
		workers, concurrency int
	}{{1, 1, 1}, {42, 3, 2}} {
		o := baseOptions()
		o.Seed, o.Workers, o.Concurrency, o.WorldSize = tc.seed, tc.workers, tc.concurrency, 2
		errs := make(chan error, 2)
		for r := range 2 {
			o := o
			o.Rank = r
			want := unionReference(t, parts, o)
			go func() {
				errs <- func() error {
					l, err := client.OpenLoader(ctx, socket, o)
					if err != nil {
						return fmt.Errorf("rank %d: %w", r, err)
					}
					defer l.Close()
					if l.Info().SubRings != tc.workers || l.Info().Part != r {
						return fmt.Errorf("rank %d: loader %+v, want %d sub-rings sampled by part %d", r, l.Info(), tc.workers, r)
					}
					st, err := client.Stats(ctx, c.sockets[r])
					if err != nil {
						return err
					}
					c.note(st)
					if len(st.Loaders) != 1 || len(st.Loaders[0].Samplers) != tc.workers {
						return fmt.Errorf("rank %d: node %d serves %+v, want this loader of %d samplers alone", r, r, st.Loaders, tc.workers)
					}
					return compare(ctx, l, want, fmt.Sprintf("seed %d workers %d rank %d", tc.seed, tc.workers, r))
				}()
			}()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		for p := range 2 {
			eventually(t, 10*time.Second, fmt.Sprintf("node %d closes its remote loaders", p), func() bool {
				st, err := client.Stats(ctx, c.sockets[p])
				return err == nil && len(st.Loaders) == 0
			})
		}
	}
	// Each sampling node's link to the client node carried two opens and
	// four streams (one per sub-ring: 1, then 3 workers): a request each,
	// counted alike at both ends. The client node counted every record
	// and end of stream as a request of its own (dir out), its sampling
	// node each stream once (dir in).
	var now [2]link
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		now = links(t, ctx, socket, c.sockets)
		agree := true
		for p := range 2 {
			out, in := now[p].out.minus(before[p].out), now[p].in.minus(before[p].in)
			agree = agree && out == in && out.Requests == 6
		}
		if agree || time.Now().After(deadline) {
			break
		}
	}
	for p := range 2 {
		out, in := now[p].out.minus(before[p].out), now[p].in.minus(before[p].in)
		if out.Requests != 6 || out.Errors != 0 || out != in {
			t.Errorf("the link between the client node and node %d: the client counts %+v (dir out), node %d %+v (dir in); want 6 requests, no error, alike at both ends",
				p, out, p, in)
		}
	}
	for p := range 2 {
		if !c.nodes[p].logHas(`"msg":"remote loader opened"`, `"peer":"trainer0"`) || !c.nodes[p].logHas(`"reason":"every sub-ring streamed"`) {
			t.Errorf("node %d log lacks the remote loader's opening and closing:\n%s", p, c.nodes[p].log)
		}
	}
	var st *control.Stats
	eventually(t, 10*time.Second, "the client node closes its loaders", func() bool {
		var err error
		st, err = client.Stats(ctx, socket)
		return err == nil && len(st.Loaders) == 0
	})
	if st.Part != -1 || st.Opened != 4 || st.Batches == 0 || st.Failures != 0 || len(st.Loaders) != 0 || st.Mesh == nil || len(st.Mesh.Peers) != 2 {
		t.Errorf("client node stats %+v, want part -1, 4 loaders opened and closed, batches, both peers", st)
	}
	bad := baseOptions()
	bad.BatchSize, bad.RingSize = 4096, "32KiB" // a batch of every training seed does not fit
	// Refused there, with the key a sampling node's own trainer would get.
	var ce *control.Error
	if _, err := client.OpenLoader(ctx, socket, bad); !errors.As(err, &ce) || ce.Key != "ring_size" ||
		!strings.HasPrefix(ce.Msg, "the sampling node of part 0 refused the loader: 32KiB gives ") {
		t.Errorf("a loader the sampling node refuses: %v, want its reason naming part 0, with key ring_size", err)
	}
	bad = baseOptions()
	bad.Split, bad.SeedIDs = "", []uint64{1, 1}
	if _, err := client.OpenLoader(ctx, socket, bad); !errors.As(err, &ce) || ce.Key != "seed_ids" || !strings.Contains(ce.Msg, "seed 1 listed twice") {
		t.Errorf("seed_ids the sampling node refuses: %v, want key seed_ids", err)
	}
	checkClientKV(t, ctx, parts, socket, c.sockets[1])
	if !cl.logHas(`"msg":"node ready"`, `"role":"client"`, `"peers":["0=host0@`, `"1=host1@`) {
		t.Errorf("client node log lacks its ready line naming both sampling nodes:\n%s", cl.log)
	}
}

// link is the traffic between the client node and one sampling node:
// the client node's calls to it (out) and the requests it served for the
// client node (in).
type link struct{ out, in traffic }

// traffic is the counters of control.TrafficStats that both ends of a
// link count alike.
type traffic struct{ Requests, Errors, BytesSent, BytesReceived uint64 }

// minus is t less o, counter by counter.
func (t traffic) minus(o traffic) traffic {
	return traffic{t.Requests - o.Requests, t.Errors - o.Errors, t.BytesSent - o.BytesSent, t.BytesReceived - o.BytesReceived}
}

// links reads the link of the client node on socket with each sampling
// node on sockets, from both ends; in is given from the client node's
// side (sent: what the client node sent).
func links(t *testing.T, ctx context.Context, socket string, sockets []string) [2]link {
	t.Helper()
	cl := stats(t, ctx, socket)
	var l [2]link
	for p := range l {
		in := peerTraffic(stats(t, ctx, sockets[p]), clientName, true)
		in.BytesSent, in.BytesReceived = in.BytesReceived, in.BytesSent
		l[p] = link{out: peerTraffic(cl, hostName(p), false), in: in}
	}
	return l
}

// stats is the stats of the node on socket, which must have a mesh.
func stats(t *testing.T, ctx context.Context, socket string) *control.Stats {
	t.Helper()
	st, err := client.Stats(ctx, socket)
	if err != nil || st.Mesh == nil {
		t.Fatalf("stats of %s: %+v, %v", socket, st, err)
	}
	return st
}

// peerTraffic is st's traffic with peer: the requests it served for it
// (in) or made to it.
func peerTraffic(st *control.Stats, peer string, in bool) traffic {
	for _, p := range st.Mesh.Peers {
		if p.Name != peer {
			continue
		}
		d := p.Out
		if in {
			d = p.In
		}
		return traffic{d.Requests, d.Errors, d.BytesSent, d.BytesReceived}
	}
	return traffic{}
}

// serverClient starts a 2-part cluster and a client node of it, all with
// the given mesh timeout, and returns the parts, the cluster, the client
// node's socket and a context that ends after 90 s.
func serverClient(t *testing.T, timeout string) (string, *testCluster, string, context.Context) {
	parts := clusterParts(t, 2)
	c := startCluster(t, parts, 2, timeout)
	_, socket := c.startClient(timeout)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return parts, c, socket, ctx
}

// checkClientKV creates kvTables through the client node's socket,
// pushes rows of both parts and steps the dense table with two trainers
// there, and compares with one in-process store, read through the client
// node and through a sampling node's socket.
func checkClientKV(t *testing.T, ctx context.Context, parts, socket, server string) {
	t.Helper()
	m, err := partition.OpenDir(parts)
	if err != nil {
		t.Fatal(err)
	}
	book, _ := m.Book()
	ref := refStore(t, book.NumNodes())
	k := dialKV(t, socket)
	for _, ts := range kvTables() {
		if info, err := k.Create(ctx, ts); err != nil || len(info.Bounds) != 3 {
			t.Fatalf("create %s through the client node: %+v, %v", ts.Name, info, err)
		}
	}
	total := book.NumNodes()
	ids := []uint64{0, total - 1, total / 2, 7}
	g := grad(0, 1, len(ids)*4)
	if err := k.Push(ctx, "emb", ids, g); err != nil {
		t.Fatal(err)
	}
	if err := ref.Push("emb", ids, g); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	k2 := dialKV(t, socket)
	for r, kc := range []*client.KV{k, k2} {
		wg.Go(func() { errs[r] = kc.PushSync(ctx, "dense", 0, r, 2, grad(r, 0, 33)) })
		wg.Go(func() { errs[2+r] = ref.PushSync(ctx, "dense", 0, r, 2, grad(r, 0, 33)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	dense := []uint64{0, 5, 10}
	wantEmb, _ := ref.Pull("emb", ids, nil)
	wantDense, _ := ref.Pull("dense", dense, nil)
	for _, s := range []string{socket, server} {
		kc := dialKV(t, s)
		if s == server {
			if _, err := kc.Create(ctx, kvTables()[0]); err != nil { // the same spec: known there
				t.Fatal(err)
			}
			if _, err := kc.Create(ctx, kvTables()[1]); err != nil {
				t.Fatal(err)
			}
		}
		emb, err := kc.Pull(ctx, "emb", ids, nil)
		if err != nil || !slices.Equal(emb, wantEmb) {
			t.Fatalf("emb through %s: %v, %v; want %v", s, emb, err, wantEmb)
		}
		got, v, err := kc.PullVersion(ctx, "dense", 1, dense, nil)
		if err != nil || v != 1 || !slices.Equal(got, wantDense) {
			t.Fatalf("dense through %s: version %d, %v, %v; want %v", s, v, err, got, wantDense)
		}
	}
	if info, err := k.Save(ctx); err == nil || !strings.Contains(err.Error(), "checkpoint_dir") {
		t.Errorf("kv_save through the client node without checkpoint dirs: %+v, %v; want the sampling nodes' refusal", info, err)
	}
	k.Done(ctx)
	k2.Done(ctx)
}

// TestServerClientServerStops: when the sampling node of a trainer's
// loader stops mid-epoch (SIGTERM) the trainer on the client node gets a
// sampler error naming that node's part at once; when it vanishes
// (SIGKILL) within the mesh's idle timeout (20 s). The client node serves new
// loaders once the nodes are back.
func TestServerClientServerStops(t *testing.T) {
	parts, c, socket, ctx := serverClient(t, "3s")
	o := baseOptions()
	o.WorldSize, o.Workers, o.Epochs, o.BatchSize, o.RingSize = 2, 2, 1000, 16, "4MiB"
	signals := []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}
	// A vanished node is noticed when the QUIC connection's idle timer
	// fires: MaxIdleTimeout after the first keep-alive that follows its
	// last packet.
	// The trainer reads the batches already in its ring first (up to
	// 4 MiB of them), hence the margins.
	bounds := []time.Duration{10 * time.Second, mesh.MaxIdleTimeout + mesh.KeepAlivePeriod + 5*time.Second}
	loaders := make([]*client.Loader, 2)
	for r := range 2 {
		o := o
		o.Rank = r
		l := openReading(t, ctx, socket, o, 5)
		if st, err := client.Stats(ctx, c.sockets[r]); err == nil {
			c.note(st)
		}
		loaders[r] = l
	}
	before := stats(t, ctx, socket)
	errs := make(chan error, 2)
	for r, l := range loaders {
		c.nodes[r].cmd.Process.Signal(signals[r])
		stopped := time.Now()
		go func() {
			errs <- func() error {
				for {
					_, err := l.Next(ctx)
					if err == nil || errors.Is(err, client.ErrEndOfEpoch) {
						continue
					}
					want := fmt.Sprintf("sampling node of part %d", r)
					if !errors.Is(err, client.ErrSampler) || !strings.Contains(err.Error(), want) {
						return fmt.Errorf("after %v: err = %v, want a sampler error naming the %s", signals[r], err, want)
					}
					if d := time.Since(stopped); d > bounds[r] {
						return fmt.Errorf("after %v: the error came %v later, want within %v", signals[r], d, bounds[r])
					}
					t.Logf("%v after %v: %v", signals[r], time.Since(stopped), err)
					return nil
				}
			}()
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	for r := range 2 {
		<-c.nodes[r].done
		loaders[r].Close()
	}
	// Every sub-ring whose stream broke (at least the one each trainer
	// read its error from; another may have waited on a ring that the
	// trainer stopped reading, and ended with its loader) is a sampler
	// failure of the client node and a failed request to that sampling
	// node, and is logged once; neither counter used to move.
	var st *control.Stats
	eventually(t, 10*time.Second, "the client node closes the failed loaders", func() bool {
		st = stats(t, ctx, socket)
		return len(st.Loaders) == 0
	})
	var failed uint64
	for r := range 2 {
		lines := uint64(c.client.logCount(`"msg":"relayed loader failed"`, fmt.Sprintf(`"err":"the sampling node of part %d, sub-ring `, r)))
		failed += lines
		out := peerTraffic(st, hostName(r), false).minus(peerTraffic(before, hostName(r), false))
		if lines < 1 || lines > uint64(o.Workers) || out.Errors != lines || out.Requests != uint64(o.Workers) {
			t.Errorf("after %v: the client node logged %d relayed failures of part %d and counts %d requests to it, %d failed; want 1 to %d failures, %d requests (its streams), as many errors as failures",
				signals[r], lines, r, out.Requests, out.Errors, o.Workers, o.Workers)
		}
	}
	if got := st.Failures - before.Failures; got != failed {
		t.Errorf("the client node counts %d sampler failures, want %d (one per relayed sub-ring that failed)", got, failed)
	}
	for r := range 2 { // each waits for the other to be ready
		c.nodes[r] = startDaemon(t, c.bin, c.configs[r], c.sockets[r], c.rings[r])
	}
	for r := range 2 {
		c.waitReady(r)
	}
	o.Epochs, o.BatchSize, o.RingSize, o.Rank = 1, 64, "", 1
	want := unionReference(t, parts, o)
	l, err := client.OpenLoader(ctx, socket, o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if st, err := client.Stats(ctx, c.sockets[1]); err == nil {
		c.note(st)
	}
	readAll(t, ctx, l, want, "after restart")
}

// TestServerClientStalledLoader: a trainer that stops reading (its ring
// full, its streams' flow-control windows full) does not hold up another
// trainer's loader sampled by the same node: each remote loader has a
// connection, and so flow-control windows, of its own.
func TestServerClientStalledLoader(t *testing.T) {
	parts, c, socket, ctx := serverClient(t, "10s")
	stalled := baseOptions()
	stalled.WorldSize, stalled.Workers, stalled.Epochs, stalled.BatchSize, stalled.RingSize = 2, 4, 100000, 512, "4MiB"
	stalled.Fanouts = []int{10, 10}
	l, err := client.OpenLoader(ctx, socket, stalled)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if st, err := client.Stats(ctx, c.sockets[0]); err == nil {
		c.note(st)
	}
	// Let its samplers fill every buffer between them and the trainer.
	var made uint64
	eventually(t, 30*time.Second, "the stalled loader's buffers fill", func() bool {
		st, err := client.Stats(ctx, c.sockets[0])
		if err != nil || len(st.Loaders) != 1 {
			return false
		}
		b := st.Loaders[0].Batches
		full := b > 0 && b == made
		made = b
		time.Sleep(500 * time.Millisecond)
		return full
	})
	t.Logf("the stalled loader's samplers made %d batches before they blocked", made)
	o := baseOptions()
	o.WorldSize, o.Epochs = 2, 1
	want := unionReference(t, parts, o)
	l2, err := client.OpenLoader(ctx, socket, o)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if st, err := client.Stats(ctx, c.sockets[0]); err == nil {
		c.note(st)
	}
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	readAll(t, rctx, l2, want, "beside a stalled loader")

	// The trainer of the stalled loader goes: the sampling node closes
	// its loader, and says it ended early, not that every sub-ring was
	// streamed (which it said of any relayed loader). The client node
	// closes the loader's connection, so the sampling node sees either
	// first: its streams cut, or the connection gone.
	l.Close()
	eventually(t, 10*time.Second, "the sampling node logs why the stalled loader closed", func() bool {
		for _, n := range c.nodes {
			if n.logHas(`"msg":"loader closed"`, "ended before their end of stream") || n.logHas(`"msg":"loader closed"`, `"loader":1,"reason":"peer's connection closed"`) {
				return true
			}
		}
		return false
	})
	for _, n := range c.nodes {
		if n.logHas(`"loader":1,"reason":"every sub-ring streamed"`) {
			t.Error("the sampling node says the stalled loader streamed every sub-ring")
		}
	}
}

// TestRelaySamplerPause: a relayed loader of 8 workers (2 MiB sub-rings)
// whose sampler 1 pauses for 3 s (SIGSTOP, below shm.DeadAfter: a slow
// remote fetch, a descheduled process) while the trainer reads. The other
// sub-rings fill on both nodes, their streams' records wait unread on the
// client node, and they used up the loader connection's shared QUIC
// window: once the sampler resumed, its stream got no credit and the
// trainer waited for ever. Every batch must come.
func TestRelaySamplerPause(t *testing.T) {
	_, c, socket, ctx := serverClient(t, "10s")
	o := baseOptions()
	o.WorldSize, o.Rank, o.Workers, o.Epochs, o.BatchSize = 2, 0, 8, 1000, 64
	l := openReading(t, ctx, socket, o, 8)
	st, err := client.Stats(ctx, c.sockets[0])
	if err != nil || len(st.Loaders) != 1 {
		t.Fatalf("stats %+v %v", st, err)
	}
	c.note(st)
	pid := st.Loaders[0].Samplers[1].PID
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(3 * time.Second)
		syscall.Kill(pid, syscall.SIGCONT)
	}()
	// Without the fix the trainer hung for good within 50 batches; with it
	// 3000 batches took 45 s under -race on two busy cores, and the longest
	// wait was the pause itself (2-3 s). 600 batches and a minute and a
	// half leave room for a slow machine.
	rctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	for n := 0; n < 600; n++ {
		if _, err := l.Next(rctx); err != nil && !errors.Is(err, client.ErrEndOfEpoch) {
			st0, _ := client.Stats(context.Background(), c.sockets[0])
			stc, _ := client.Stats(context.Background(), socket)
			t.Fatalf("trainer stuck after %d batches (the sampler resumed 3 s after the start): %v\nsampling node loaders: %+v\nclient loaders: %+v",
				n, err, st0.Loaders, stc.Loaders)
		}
	}
}

// TestLoaderStreamsFitTheWindow: a relayed loader has as many streams as
// workers, and the loader connection's window covers mesh.MaxLoaderStreams
// of them: the node's largest workers setting must not pass it.
func TestLoaderStreamsFitTheWindow(t *testing.T) {
	if control.MaxWorkers > mesh.MaxLoaderStreams {
		t.Fatalf("control.MaxWorkers %d > mesh.MaxLoaderStreams %d", control.MaxWorkers, mesh.MaxLoaderStreams)
	}
}

// TestClientNodeDrainDuringOpen: SIGTERM on a client node while a
// trainer's loader waits for its sampling node (whose split waits on a
// stopped peer) ends that open at once with "node is stopping"; the
// drain waited for the sampling node's answer (about 20 s here, up to
// mesh.LoaderOpenTimeout) before it stopped any other loader.
func TestClientNodeDrainDuringOpen(t *testing.T) {
	_, c, socket, ctx := serverClient(t, "40s")
	stopped := c.nodes[1].cmd.Process
	if err := stopped.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	t.Cleanup(func() { stopped.Signal(syscall.SIGCONT) }) // before the daemons stop
	o := baseOptions()
	o.WorldSize, o.Rank = 2, 0 // sampled by part 0, which asks part 1 for its split
	errs := make(chan error, 1)
	go func() {
		l, err := client.OpenLoader(ctx, socket, o)
		if err == nil {
			l.Close()
		}
		errs <- err
	}()
	// Time for the request to reach part 0 (the answer takes ~20 s).
	// Sooner, the drain would refuse it before it opens: the test
	// would pass without exercising the wait.
	time.Sleep(time.Second)
	c.client.cmd.Process.Signal(syscall.SIGTERM)
	var ce *control.Error
	if err := <-errs; !errors.As(err, &ce) || ce.Msg != "node is stopping" {
		t.Fatalf("open_loader during the client node's drain: %v, want \"node is stopping\"", err)
	}
	// Part 0 cannot give up on part 1's split before its connection to
	// the stopped node idles out: an answer before that did not wait
	// for the sampling node.
	if d := time.Since(stoppedAt); d >= mesh.MaxIdleTimeout {
		t.Errorf("the answer came %v after part 1 stopped, want before part 0's connection to it idles out (%v): the drain waited for the sampling node", d, mesh.MaxIdleTimeout)
	}
	<-c.client.done
	if c.client.err != nil {
		t.Fatalf("client node exited with %v", c.client.err)
	}
}

// logCount is the number of the daemon's log lines that hold every
// fragment.
func (d *daemon) logCount(fragments ...string) int {
	n := 0
	for _, line := range strings.Split(d.log.String(), "\n") {
		all := true
		for _, f := range fragments {
			all = all && strings.Contains(line, f)
		}
		if all {
			n++
		}
	}
	return n
}
