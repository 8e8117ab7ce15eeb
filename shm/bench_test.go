package shm

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"testing"
)

// Run: go test -run '^$' -bench . -benchtime 2s ./shm/
// The cross-process benchmarks re-execute the test binary as the producer
// (or the echo peer), so producer and consumer are separate processes as
// with a sampler and a trainer.

// benchSizes: the record size of the design's figure (64 KiB), through a
// sub-ring that fits in the cache and through one the size of a default
// "1GB" ring split among 8 samplers.
func benchSizes() []struct{ record, ring int64 } {
	return []struct{ record, ring int64 }{
		{64 << 10, 8 << 20},
		{64 << 10, 128 << 20},
	}
}

// BenchmarkCrossProcess: a producer process copies 64 KiB records into the
// ring; this process reads them in place and releases them.
func BenchmarkCrossProcess(b *testing.B) {
	for _, s := range benchSizes() {
		b.Run(fmt.Sprintf("record=%s/ring=%s", FormatSize(s.record), FormatSize(s.ring)), func(b *testing.B) {
			r := newTestRing(b, 1, s.ring)
			c, err := r.Consumer()
			if err != nil {
				b.Fatal(err)
			}
			cmd := startHelper(b, envMode+"=stream", envRing+"="+r.Path(), envSub+"=0",
				envRecord+"="+strconv.FormatInt(s.record, 10))
			consume(b, c, s.record)
			c.Close()
			if err := cmd.Wait(); err != nil {
				b.Fatalf("producer: %v", err)
			}
		})
	}
}

// BenchmarkInProcess is BenchmarkCrossProcess with the producer a
// goroutine of this process.
func BenchmarkInProcess(b *testing.B) {
	for _, s := range benchSizes() {
		b.Run(fmt.Sprintf("record=%s/ring=%s", FormatSize(s.record), FormatSize(s.ring)), func(b *testing.B) {
			r := newTestRing(b, 1, s.ring)
			c, _ := r.Consumer()
			p, _ := r.Producer(0)
			done := make(chan error, 1)
			go func() {
				src := make([]byte, s.record)
				for i := 0; ; i++ {
					buf, err := p.Reserve(context.Background(), int(s.record))
					if err != nil {
						done <- nil // the consumer closed
						return
					}
					copy(buf, src)
					buf[0] = byte(i)
					p.Commit(int(s.record))
				}
			}()
			consume(b, c, s.record)
			c.Close()
			<-done
		})
	}
}

// consume reads records of sub-ring 0 for the benchmark's loop and
// checks each one's size and sequence byte.
func consume(b *testing.B, c *Consumer, size int64) {
	ctx := context.Background()
	b.SetBytes(size)
	b.ReportAllocs()
	var i int
	for b.Loop() {
		rec, err := c.Next(ctx, 0)
		if err != nil {
			b.Fatal(err)
		}
		if int64(len(rec)) != size || rec[0] != byte(i) {
			b.Fatalf("record %d: %d bytes, sequence byte %d", i, len(rec), rec[0])
		}
		c.Release(0)
		i++
	}
	b.ReportMetric(float64(i)*float64(size)/1e9/b.Elapsed().Seconds(), "GB/s")
}

// BenchmarkPingPong: the round trip of one small record to a peer and
// back through two rings, with spin-then-futex waiting on both sides.
// ns/op is the round-trip latency.
func BenchmarkPingPong(b *testing.B) {
	for _, peer := range []string{"goroutine", "process"} {
		b.Run("peer="+peer, func(b *testing.B) {
			dir := testDir(b)
			to, err := Create(filepath.Join(dir, "to.ring"), Options{SubRings: 1, Capacity: 1 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer to.Remove()
			from, err := Create(filepath.Join(dir, "from.ring"), Options{SubRings: 1, Capacity: 1 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer from.Remove()
			done := make(chan error, 1)
			if peer == "process" {
				cmd := startHelper(b, envMode+"=echo", envRing+"="+to.Path(), envRing2+"="+from.Path())
				go func() { done <- cmd.Wait() }()
			} else {
				go func() { done <- echo(to, from) }()
			}
			p, _ := to.Producer(0)
			c, _ := from.Consumer()
			ctx := context.Background()
			msg := make([]byte, 64)
			b.ReportAllocs()
			for b.Loop() {
				if err := p.Write(ctx, msg); err != nil {
					b.Fatal(err)
				}
				if _, err := c.Next(ctx, 0); err != nil {
					b.Fatal(err)
				}
				c.Release(0)
			}
			p.Close()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// echo answers every record of in's sub-ring 0 on out's sub-ring 0.
func echo(in, out *Ring) error {
	c, err := in.Consumer()
	if err != nil {
		return err
	}
	p, err := out.Producer(0)
	if err != nil {
		return err
	}
	defer p.Close()
	for {
		rec, err := c.Next(context.Background(), 0)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := p.Write(context.Background(), rec); err != nil {
			return err
		}
		c.Release(0)
	}
}
