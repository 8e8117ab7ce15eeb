package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"graphnode/shm"
)

// ringProducerCmd is the hidden subcommand this program re-executes
// itself with to be the ring's producer process.
const ringProducerCmd = "ring-producer"

func ringCmd(args []string) error {
	fs, graph := newFlags("ring")
	seconds := fs.Float64("seconds", 5, "duration of each measurement")
	dir := fs.String("dir", "/dev/shm", "directory of the ring file (a tmpfs)")
	sizes := fs.String("records", "65536,4194304", "record sizes in bytes")
	capacity := fs.String("capacity", "128MiB", "record space of the ring")
	if err := fs.Parse(args); err != nil {
		return err
	}
	recs, err := intList(*sizes)
	if err != nil {
		return err
	}
	capBytes, err := shm.ParseSize(*capacity)
	if err != nil {
		return err
	}
	fmt.Printf("ring: %s sub-ring in %s, producer and consumer in two processes, load %s\n",
		*capacity, *dir, loadAvg())
	for i, rec := range recs {
		path := filepath.Join(*dir, shm.Name("graphnode-onehost", uint64(i+1)))
		bytes, wall, cpu, err := ringOnce(path, capBytes, rec, time.Duration(*seconds*float64(time.Second)))
		if err != nil {
			return err
		}
		target, ref := "", ""
		if rec == 64<<10 {
			target, ref = "≥8G", "11-12G (issue)"
		}
		emit(result{graph: *graph, what: "ring " + shm.FormatSize(int64(rec)) + " records", workers: 1,
			value: bytes / wall, perCPU: bytes / cpu, unit: "B/s", target: target, ref: ref})
	}
	return nil
}

// ringOnce streams records of size rec from a child process through a
// new ring at path for d, reading each in place here, and returns the
// payload bytes read, the wall time and the CPU time of both processes.
func ringOnce(path string, capacity int64, rec int, d time.Duration) (bytes, wall, cpu float64, err error) {
	r, err := shm.Create(path, shm.Options{SubRings: 1, Capacity: capacity, Prealloc: true})
	if err != nil {
		return 0, 0, 0, err
	}
	defer r.Remove()
	c, err := r.Consumer()
	if err != nil {
		return 0, 0, 0, err
	}
	defer c.Close()
	exe, err := os.Executable()
	if err != nil {
		return 0, 0, 0, err
	}
	cmd := exec.Command(exe, ringProducerCmd, path, strconv.Itoa(rec))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return 0, 0, 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	// The first record marks the start: the child's start-up is not timed.
	if _, err := c.Next(ctx, 0); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return 0, 0, 0, fmt.Errorf("ring: first record: %w", err)
	}
	c.Release(0)
	cpu0, t0 := cpuSelf(), time.Now()
	var n int
	var seq byte = 1
	for time.Since(t0) < d {
		b, err := c.Next(ctx, 0)
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return 0, 0, 0, fmt.Errorf("ring: record %d: %w", n, err)
		}
		if len(b) != rec || b[0] != seq || b[len(b)-1] != seq {
			cmd.Process.Kill()
			cmd.Wait()
			return 0, 0, 0, fmt.Errorf("ring: record %d: %d bytes, sequence %d/%d, want %d bytes, %d",
				n, len(b), b[0], b[len(b)-1], rec, seq)
		}
		seq++
		n++
		c.Release(0)
	}
	wall = time.Since(t0).Seconds()
	cpu = (cpuSelf() - cpu0).Seconds()
	c.Close() // the producer's Reserve now fails with ErrConsumerGone
	if err := cmd.Wait(); err != nil {
		return 0, 0, 0, fmt.Errorf("ring: producer: %w", err)
	}
	// The producer ran as long as the consumer, give or take its start-up
	// and drain; its CPU time is counted whole.
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	return float64(n) * float64(rec), wall, cpu, nil
}

// ringProducer is the child: it writes records of the given size into
// sub-ring 0 of the ring, each filled from a source buffer with its
// sequence number in the first and last byte, until the consumer leaves.
func ringProducer(args []string) error {
	if len(args) != 2 {
		return errors.New("usage: ring-producer PATH RECORD")
	}
	rec, err := strconv.Atoi(args[1])
	if err != nil {
		return err
	}
	r, err := shm.Open(args[0])
	if err != nil {
		return err
	}
	defer r.Close()
	p, err := r.Producer(0)
	if err != nil {
		return err
	}
	defer p.Close()
	src := make([]byte, rec)
	ctx := context.Background()
	for seq := byte(0); ; seq++ {
		buf, err := p.Reserve(ctx, rec)
		if errors.Is(err, shm.ErrConsumerGone) {
			return nil
		}
		if err != nil {
			return err
		}
		copy(buf, src)
		buf[0], buf[rec-1] = seq, seq
		if err := p.Commit(rec); err != nil {
			return err
		}
	}
}
