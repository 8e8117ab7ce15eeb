package partition

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// ErrOutputNotEmpty is returned when an output directory already holds
// files and the caller did not ask to overwrite them.
var ErrOutputNotEmpty = errors.New("output directory not empty")

// OGBWriteOptions configures WriteOGB.
type OGBWriteOptions struct {
	Gzip   bool   // write *.csv.gz (as OGB ships them) instead of *.csv
	Scheme string // split folder name under split/; default "random"
	// Force allows a non-empty dir: its raw/ and split/ are replaced once
	// the new ones are complete (a failed write leaves them as they
	// were), anything else in it is left alone.
	Force bool
	// Checked is the caller's CheckOGBOutput of dir, run before the graph
	// was generated (minutes at ogbn-products' size): the run began
	// there, and what dir holds by now that the check did not see
	// appeared during it. nil: the run is WriteOGB's.
	Checked  *OGBOutputCheck
	Workers  int // formatting goroutines; 0 = GOMAXPROCS (at most MaxGenWorkers)
	Progress Progress
}

// WriteOGB writes g in the raw layout of an OGB node-property dataset, the
// one the "ogb" reader reads:
//
//	dir/raw/edge.csv           src,dst per edge, no header
//	dir/raw/num-node-list.csv  N
//	dir/raw/num-edge-list.csv  E
//	dir/raw/node-feat.csv      FeatDim comma-separated floats per node (if any)
//	dir/raw/node-label.csv     LabelDim integers per node, nan = missing (if any)
//	dir/split/<scheme>/{train,valid,test}.csv   one node index per line
//
// With Gzip every name gets .gz. Floats are written in the shortest form
// that parses back to the same float32. Edge weights, relation types and
// the KG side are not written: OGB keeps weights in edge-feat.csv only for
// some datasets, and knowledge graphs have their own layout. The files are
// written and synced under a temporary directory in dir, and raw/ and
// split/ renamed into place at the end (see ogbSwap). Nothing that
// appears in dir during the run (from opts.Checked, else from
// WriteOGB's start) is replaced or removed: without opts.Force anything
// there fails the run; with it, a raw/ or split/ that dir did not hold
// as the run began does (the ones it held are replaced, with what
// appeared in them, which cannot be told apart), and anything else is
// left beside them. WriteOGB fails naming what appeared and the
// temporary directory, which it leaves holding the finished raw/ and
// split/: in dir, or beside it when a file appeared in its place.
func WriteOGB(ctx context.Context, dir string, g *Graph, opts OGBWriteOptions) (err error) {
	if opts.Scheme == "" {
		opts.Scheme = "random"
	}
	if opts.Scheme == "." || opts.Scheme == ".." || strings.ContainsAny(opts.Scheme, `/\`) {
		return fmt.Errorf("partition: write ogb %s: split scheme %q is not a single folder name (it names split/<scheme>/)", dir, opts.Scheme)
	}
	if p := checkGenWorkers(opts.Workers); p != "" {
		return fmt.Errorf("partition: write ogb %s: %s", dir, p)
	}
	if opts.Workers <= 0 {
		opts.Workers = min(runtime.GOMAXPROCS(0), MaxGenWorkers)
	}
	if len(g.Src) != len(g.Dst) {
		return fmt.Errorf("partition: write ogb %s: %d sources but %d destinations", dir, len(g.Src), len(g.Dst))
	}
	if g.FeatDim > 0 && len(g.Feat) != g.NumNodes*g.FeatDim {
		return fmt.Errorf("partition: write ogb %s: %d feature values, want %d nodes x %d", dir, len(g.Feat), g.NumNodes, g.FeatDim)
	}
	if g.Labels != nil && (g.LabelDim < 1 || len(g.Labels) != g.NumNodes*g.LabelDim) {
		return fmt.Errorf("partition: write ogb %s: %d labels, want %d nodes x %d", dir, len(g.Labels), g.NumNodes, g.LabelDim)
	}
	var plan ogbPlan
	if c := opts.Checked; c != nil {
		if c.dir != dir || c.force != opts.Force {
			return fmt.Errorf("partition: write ogb %s (force %t): checked %s (force %t)", dir, opts.Force, c.dir, c.force)
		}
		// dir passed the check before the graph was generated:
		// refusing what it holds now threw the graph away. It appeared
		// since, and is kept, once the files are written.
		plan = c.plan
	} else if plan, err = ogbCheckDir(dir, opts.Force); err != nil {
		return err
	}
	if err := plan.removeStale(dir); err != nil {
		return err
	}
	if plan.replacing() {
		defer func() {
			if errors.Is(err, syscall.ENOSPC) {
				err = fmt.Errorf("%w (--force keeps the old raw/ and split/ of %s until the new ones are complete: remove them to free their space)", err, dir)
			}
		}()
	}
	if _, serr := os.Lstat(dir); errors.Is(serr, fs.ErrNotExist) {
		// A write that fails leaves no empty dir behind it, as it found
		// none (os.Remove leaves a directory that is not empty).
		defer func() {
			if err != nil {
				os.Remove(dir)
			}
		}()
	}
	// Everything is written under a temporary directory and moved into
	// place once complete, so that a failure (a full disk, a cancelled
	// context) leaves what --force would have replaced intact.
	tmp, inside, err := ogbMakeTemp(dir)
	if err != nil {
		return err
	}
	kept := false
	defer func() {
		if !kept {
			os.RemoveAll(tmp) // after the swap it holds the replaced raw/ and split/
		}
	}()
	rawDir := filepath.Join(tmp, "raw")
	splitDir := filepath.Join(tmp, "split", opts.Scheme)
	for _, d := range []string{rawDir, splitDir} {
		if err := os.MkdirAll(d, 0o777); err != nil {
			return fmt.Errorf("partition: write ogb: %w", err)
		}
	}
	w := ogbWriter{ctx: ctx, dir: dir, tmp: tmp, opts: opts}
	ext := ".csv"
	if opts.Gzip {
		ext = ".csv.gz"
	}

	const edgeRows = 1 << 16
	w.file(filepath.Join(rawDir, "edge"+ext), len(g.Src), edgeRows, func(lo, hi int, b []byte) []byte {
		for e := lo; e < hi; e++ {
			b = strconv.AppendUint(b, uint64(g.Src[e]), 10)
			b = append(b, ',')
			b = strconv.AppendUint(b, uint64(g.Dst[e]), 10)
			b = append(b, '\n')
		}
		return b
	})
	w.line(filepath.Join(rawDir, "num-node-list"+ext), int64(g.NumNodes))
	w.line(filepath.Join(rawDir, "num-edge-list"+ext), int64(len(g.Src)))
	if g.FeatDim > 0 {
		dim := g.FeatDim
		w.file(filepath.Join(rawDir, "node-feat"+ext), g.NumNodes, max(1, (1<<17)/dim), func(lo, hi int, b []byte) []byte {
			for _, row := range ogbRows(g.Feat, dim, lo, hi) {
				for j, f := range row {
					if j > 0 {
						b = append(b, ',')
					}
					b = strconv.AppendFloat(b, float64(f), 'g', -1, 32)
				}
				b = append(b, '\n')
			}
			return b
		})
	}
	if g.Labels != nil {
		dim := g.LabelDim
		w.file(filepath.Join(rawDir, "node-label"+ext), g.NumNodes, max(1, (1<<18)/dim), func(lo, hi int, b []byte) []byte {
			for _, row := range ogbRows(g.Labels, dim, lo, hi) {
				for j, l := range row {
					if j > 0 {
						b = append(b, ',')
					}
					if l < 0 {
						b = append(b, "nan"...)
					} else {
						b = strconv.AppendInt(b, int64(l), 10)
					}
				}
				b = append(b, '\n')
			}
			return b
		})
	}
	for _, s := range []struct {
		name string
		ids  []uint32
	}{{"train", g.Train}, {"valid", g.Val}, {"test", g.Test}} {
		if s.ids == nil {
			continue
		}
		w.file(filepath.Join(splitDir, s.name+ext), len(s.ids), 1<<18, func(lo, hi int, b []byte) []byte {
			for _, u := range s.ids[lo:hi] {
				b = strconv.AppendUint(b, uint64(u), 10)
				b = append(b, '\n')
			}
			return b
		})
	}
	if w.err != nil {
		return w.err
	}
	for _, d := range []string{rawDir, splitDir, filepath.Dir(splitDir), tmp} {
		if err := SyncDir(d); err != nil {
			return err
		}
	}
	// What appeared in dir since the run began is the user's (or
	// another run's), and is neither replaced nor removed. tmp, the
	// finished dataset, is kept for the user to take.
	if !inside {
		kept = true
		return outputChanged(tmp, dir, opts.Force, nil, nil, ogbReplaces)
	}
	if others := plan.appeared(dir, opts.Force); len(others) > 0 {
		kept = true
		return outputChanged(tmp, dir, opts.Force, others, nil, ogbReplaces)
	}
	if err := ogbSwap(dir, tmp, plan.replace); err != nil {
		if !plan.replacing() || errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.ENOTEMPTY) {
			kept = true
			return outputChanged(tmp, dir, opts.Force, plan.appeared(dir, opts.Force), err, ogbReplaces)
		}
		return err
	}
	return nil
}

// ogbRows yields rows lo..hi-1 of a flat row-major slice.
func ogbRows[T any](flat []T, dim, lo, hi int) func(func(int, []T) bool) {
	return func(yield func(int, []T) bool) {
		for i := lo; i < hi; i++ {
			if !yield(i, flat[i*dim:(i+1)*dim]) {
				return
			}
		}
	}
}

// ogbWriter writes files one after another and keeps the first error, so
// that WriteOGB reads as the list of files it writes.
type ogbWriter struct {
	ctx  context.Context
	dir  string // the output, which errors name
	tmp  string // where the files are written until the swap
	opts OGBWriteOptions
	err  error
}

func (w *ogbWriter) line(path string, v int64) {
	w.file(path, 1, 1, func(_, _ int, b []byte) []byte {
		return append(strconv.AppendInt(b, v, 10), '\n')
	})
}

// file writes rows 0..rows-1, formatted per chunk of chunkRows by format
// on the worker goroutines (and gzipped there, one gzip member per chunk,
// which every gzip reader reads as one stream) and written in order.
func (w *ogbWriter) file(path string, rows, chunkRows int, format func(lo, hi int, b []byte) []byte) {
	if w.err != nil {
		return
	}
	rel, _ := filepath.Rel(w.tmp, path)
	err := ogbWriteFile(w.ctx, path, "write "+rel, rows, chunkRows, w.opts, format)
	if err != nil {
		// The error names the file as it will be, once: the temporary
		// directory an os.PathError names is gone when the user reads it.
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Path == path {
			err = pe.Err
		}
		w.err = fmt.Errorf("partition: write ogb %s: %w", filepath.Join(w.dir, rel), err)
	}
}

func ogbWriteFile(ctx context.Context, path, stage string, rows, chunkRows int, opts OGBWriteOptions, format func(lo, hi int, b []byte) []byte) error {
	// path lies in WriteOGB's temporary directory, removed on failure.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 4<<20)
	err = ogbPipeline(ctx, rows, chunkRows, opts.Workers, opts.Gzip, format, func(hi int, b []byte) error {
		opts.Progress.report(stage, int64(hi), int64(rows))
		_, err := bw.Write(b)
		return err
	})
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ogbJob is one chunk of rows; its bytes come back on out.
type ogbJob struct {
	lo, hi int
	out    chan []byte
}

// ogbPipeline formats chunks on workers goroutines and hands them to
// write in row order, with at most 2*workers+2 chunks in flight. Zero
// rows still make one (empty) chunk, so a gzip file is a valid stream.
func ogbPipeline(ctx context.Context, rows, chunkRows, workers int, gz bool, format func(lo, hi int, b []byte) []byte, write func(hi int, b []byte) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	chunkRows = max(chunkRows, 1)
	chunks := max(1, (rows+chunkRows-1)/chunkRows)
	window := 2*workers + 2
	order := make(chan ogbJob, window)
	jobs := make(chan ogbJob)
	free := make(chan []byte, window+2*workers)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(order)
		defer close(jobs)
		for c := range chunks {
			lo := c * chunkRows
			j := ogbJob{lo: lo, hi: min(lo+chunkRows, rows), out: make(chan []byte, 1)}
			select {
			case order <- j:
			case <-ctx.Done():
				return
			}
			select {
			case jobs <- j:
			case <-ctx.Done():
				return
			}
		}
	})
	for range workers {
		wg.Go(func() {
			var zw *gzip.Writer
			var zb ogbBuf
			for j := range jobs {
				b := format(j.lo, j.hi, ogbGet(free))
				if gz {
					zb.b = ogbGet(free)
					if zw == nil {
						zw, _ = gzip.NewWriterLevel(&zb, gzip.BestSpeed)
					} else {
						zw.Reset(&zb)
					}
					zw.Write(b) // into memory: cannot fail
					zw.Close()
					ogbPut(free, b)
					b, zb.b = zb.b, nil
				}
				j.out <- b
			}
		})
	}
	var err error
	for j := range order {
		if err != nil {
			continue // drain; the workers see ctx and stop
		}
		select {
		case b := <-j.out:
			if err = write(j.hi, b); err == nil {
				ogbPut(free, b)
			}
		case <-ctx.Done():
			err = ctx.Err()
		}
		if err != nil {
			cancel()
		}
	}
	wg.Wait()
	if err == nil {
		err = ctx.Err()
	}
	return err
}

// ogbGet takes a free buffer, or nil (append grows it) when none waits.
func ogbGet(free chan []byte) []byte {
	select {
	case b := <-free:
		return b[:0]
	default:
		return nil
	}
}

// ogbPut returns b to the free list unless it is full.
func ogbPut(free chan []byte, b []byte) {
	select {
	case free <- b[:0]:
	default:
	}
}

// ogbBuf is the append-only io.Writer the gzip writer compresses into.
type ogbBuf struct{ b []byte }

func (z *ogbBuf) Write(p []byte) (int, error) {
	z.b = append(z.b, p...)
	return len(p), nil
}
