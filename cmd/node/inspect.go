package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"graphnode/partition"
)

// runInspect is `node inspect DIR [--verify]`: describe a parts/
// directory and, with --verify, check every checksum. It exits non-zero
// when a check fails.
func runInspect(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, "inspect", "DIR [--verify] [--part K] [--fanouts 15,10,5] [--batch-size N]")
	verify := fs.Bool("verify", false, "check every section's CRC-32C and every file's CRC-32C and size against graph.toml, and the expected read shares against graph.toml's; name what the directory holds that graph.toml does not list")
	fanouts := fs.String("fanouts", "", "fanouts of the expected local / cached / remote feature-read shares (default: graph.toml's)")
	batch := fs.Int("batch-size", -1, "batch size of that estimate (-1: graph.toml's; 0 = count visits)")
	// Every part unless --part is given: -1, the default it once had,
	// was taken when given and showed every part, where a part index
	// was asked for.
	var part *int
	fs.Func("part", "inspect (and verify) graph.toml and part `K` alone: what one host of a cluster holds (default: every part)", func(s string) error {
		k, err := strconv.Atoi(s)
		if err != nil {
			return errors.New("not an integer")
		}
		part = &k
		return nil
	})
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if part != nil && *part < 0 {
		fmt.Fprintf(a.stderr, "node inspect: --part %d: want a part index, 0 or more (leave --part out for every part)\n", *part)
		return errUsage
	}
	if *batch < -1 {
		fmt.Fprintf(a.stderr, "node inspect: --batch-size %d: want 0 or more (or -1 for graph.toml's)\n", *batch)
		return errUsage
	}
	if len(pos) != 1 {
		fmt.Fprintln(a.stderr, "node inspect: want one directory")
		fs.Usage()
		return errUsage
	}
	var fans []int
	if *fanouts != "" {
		// A bad value is a usage error, found before graph.toml is read.
		if fans, err = parseFanouts(*fanouts); err != nil {
			fmt.Fprintf(a.stderr, "node inspect: %v\n", err)
			return errUsage
		}
	}
	opts := partition.InspectOptions{Verify: *verify, Part: part}
	if *fanouts != "" || *batch >= 0 {
		// The flag not given is graph.toml's; a batch size where
		// graph.toml records no estimate is the partitioner's default.
		m, err := partition.OpenManifest(pos[0])
		if err != nil {
			return err
		}
		opts.Fanouts, opts.BatchSize = m.Fanouts, m.BatchSize
		if m.Fanouts == nil {
			opts.BatchSize = partition.DefaultBatchSize
		}
		if *fanouts != "" {
			opts.Fanouts = fans
		}
		if *batch >= 0 {
			opts.BatchSize = *batch
		}
	}
	r, err := partition.Inspect(ctx, pos[0], opts)
	if err != nil {
		return err
	}
	if err := r.Format(a.stdout); err != nil {
		return err
	}
	if !r.OK() {
		failed := 0
		for _, f := range r.Files {
			if f.Err != nil {
				failed++
			}
		}
		for _, p := range r.Parts {
			if p.Err != nil && r.Files == nil {
				failed++
			}
		}
		files := "files"
		if failed == 1 {
			files = "file"
		}
		return fmt.Errorf("%s: %d %s FAILED", pos[0], failed, files)
	}
	if *verify {
		fmt.Fprintf(a.stdout, "\n%s: all %d files OK\n", pos[0], len(r.Files)+1)
	}
	return nil
}
