package mesh

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"testing"
	"time"
)

// Benchmarks of the mesh on 127.0.0.1, with a TLS-over-TCP baseline that
// moves the same framed messages over one crypto/tls connection (same
// certificates, TLS 1.3, mutual authentication):
//
//	go test -run '^$' -bench . -benchtime 2s ./mesh/

const benchRowSize = 400

// benchPulls are the pull sizes measured: a batch's worth of rows at
// 200 k nodes, and about what one node of two pulls from the other per
// batch (fanouts 15,10,5, batch 1024) on the 2.4 M-node graph.
var benchPulls = []int{1024, 32768}

// benchHandler answers from preallocated memory, as the daemon answers
// from an mmap'd partition, so the benchmark measures the transport.
type benchHandler struct {
	rows []byte
}

func newBenchHandler() *benchHandler {
	h := &benchHandler{rows: make([]byte, slices.Max(benchPulls)*benchRowSize)}
	for i := range h.rows {
		h.rows[i] = byte(i)
	}
	return h
}

func (h *benchHandler) SampleNeighbors(_ context.Context, req *SampleRequest) (*SampleResponse, error) {
	// 10 neighbours per id, as a fanout-10 hop would return.
	r := &SampleResponse{Counts: make([]uint32, len(req.IDs)), Neighbors: make([]uint64, 0, 10*len(req.IDs))}
	for i, id := range req.IDs {
		r.Counts[i] = 10
		for k := range uint64(10) {
			r.Neighbors = append(r.Neighbors, id*16+k)
		}
	}
	return r, nil
}

func (h *benchHandler) PullFeatures(_ context.Context, req *PullRequest) (*PullResponse, error) {
	return &PullResponse{DType: DTypeFloat32, RowSize: benchRowSize, Rows: h.rows[:len(req.IDs)*benchRowSize]}, nil
}

func benchCluster(b *testing.B) (*Client, *Identity, *Identity) {
	dir := writeTestCluster(b, testCluster, "host0", "host1")
	srvID, cliID := loadID(b, dir, "host1"), loadID(b, dir, "host0")
	srv, err := Listen(context.Background(), "127.0.0.1:0", ServerConfig{
		Identity: srvID, Cluster: testCluster, Checksum: "s", Part: 1, Handler: newBenchHandler(),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	c := newTestClient(b, cliID, map[int]Peer{1: {Name: "host1", Addr: srv.Addr().String()}}, func(c *ClientConfig) { c.Checksum = "s" })
	if err := c.WaitReady(context.Background()); err != nil {
		b.Fatal(err)
	}
	return c, srvID, cliID
}

func BenchmarkPull(b *testing.B) {
	for _, rows := range benchPulls {
		benchPull(b, rows)
	}
}

// benchPull moves rows rows of benchRowSize bytes per pull, over the mesh
// and over TLS on TCP. Both sides keep their response, as the daemon's
// samplers do, so neither allocates a buffer per pull.
func benchPull(b *testing.B, rows int) {
	name := fmt.Sprintf("rows=%d,row=%dB", rows, benchRowSize)
	req := &PullRequest{IDs: ids(rows, 0)}
	b.Run("transport=quic/"+name, func(b *testing.B) {
		c, _, _ := benchCluster(b)
		var resp PullResponse
		b.SetBytes(int64(rows * benchRowSize))
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Pull(context.Background(), 1, req, &resp); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pulls/s")
	})
	b.Run("transport=tls-tcp/"+name, func(b *testing.B) {
		_, srvID, cliID := benchCluster(b)
		conn := tlsTCPPair(b, srvID, cliID, newBenchHandler())
		msg, start := beginMessage(nil, TypePullRequest)
		msg = AppendPullRequest(msg, req)
		msg, _ = endMessage(msg, start, 0)
		var resp PullResponse
		var buf []byte
		b.SetBytes(int64(rows * benchRowSize))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := conn.Write(msg); err != nil {
				b.Fatal(err)
			}
			_, p, err := readMessageInto(conn, DefaultMaxMessage, buf)
			if err == nil {
				buf = p
				err = DecodePullResponse(p, &resp)
			}
			if err != nil || resp.Count() != rows {
				b.Fatal(err, resp.Count())
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pulls/s")
	})
}

// tlsTCPPair serves h over mutual TLS 1.3 on a 127.0.0.1 TCP socket, one
// request after another on one connection, with the mesh's framing, and
// returns the client side.
func tlsTCPPair(b *testing.B, srvID, cliID *Identity, h Handler) *tls.Conn {
	ln, err := tls.Listen("tcp", "127.0.0.1:0", serverTLS(srvID, ALPN))
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	b.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		sc, err := ln.Accept()
		if err != nil {
			return
		}
		defer sc.Close()
		s := &Server{cfg: ServerConfig{Identity: srvID, Handler: h, MaxMessage: DefaultMaxMessage}, in: newMetrics(Inbound)}
		for {
			hd, p, err := readMessage(sc, DefaultMaxMessage)
			if err != nil {
				return
			}
			msg, tail, _ := s.dispatch(context.Background(), hd.Type, p)
			if _, err := sc.Write(msg); err != nil {
				return
			}
			if _, err := sc.Write(tail); err != nil {
				return
			}
		}
	}()
	conn, err := tls.Dial("tcp", ln.Addr().String(), clientTLS(cliID, "host1", ALPN))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return conn
}

func BenchmarkSample(b *testing.B) {
	c, _, _ := benchCluster(b)
	req := &SampleRequest{Hop: 1, Fanout: 10, IDs: ids(1024, 0)}
	var resp SampleResponse
	b.Run("ids=1024,fanout=10", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Sample(context.Background(), 1, req, &resp); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "roundtrips/s")
		b.ReportMetric(float64(b.N*len(req.IDs)*10)/b.Elapsed().Seconds(), "edges/s")
	})
}

func BenchmarkSmallRequest(b *testing.B) {
	c, _, _ := benchCluster(b)
	req := &PullRequest{IDs: []uint64{1}}
	b.Run("conc=1", func(b *testing.B) {
		var resp PullResponse
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Pull(context.Background(), 1, req, &resp); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "requests/s")
	})
	b.Run("conc=16", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(8) // 8 × GOMAXPROCS goroutines
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			var resp PullResponse
			for pb.Next() {
				if err := c.Pull(context.Background(), 1, req, &resp); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "requests/s")
	})
}
