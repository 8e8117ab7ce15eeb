package main

import (
	"context"
	"fmt"

	"graphnode/partition"
)

// runInspect is `node inspect DIR [--verify]`: describe a parts/
// directory and, with --verify, check every checksum. It exits non-zero
// when a check fails.
func runInspect(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, "inspect", "DIR [--verify]")
	verify := fs.Bool("verify", false, "check every section's CRC-32C and every file's CRC-32C and size against graph.toml")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fmt.Fprintln(a.stderr, "node inspect: want one directory")
		fs.Usage()
		return errUsage
	}
	r, err := partition.Inspect(ctx, pos[0], partition.InspectOptions{Verify: *verify})
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
		return fmt.Errorf("%s: %d files FAILED", pos[0], failed)
	}
	if *verify {
		fmt.Fprintf(a.stdout, "\n%s: all %d files OK\n", pos[0], len(r.Files)+1)
	}
	return nil
}
