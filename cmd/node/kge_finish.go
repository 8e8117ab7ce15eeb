package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"graphnode/node/client"
	"graphnode/node/control"
)

// finish runs work, the --export and --save of the job once training is
// over, on rank 0 alone (every rank saving wrote the checkpoint
// world-size times over, and on a disk with room for one, a rank failed
// after another had saved), while every rank waits for its outcome
// (shareOutcome): rank 0 failed there and the others exited 0 as if the
// job had exported and saved. work's notes are printed once it is done.
func (f *kgeFlags) finish(ctx context.Context, out io.Writer, sync *client.Sync, work func() ([]string, error)) error {
	if f.cfg.Rank != 0 {
		if err := awaitOutcome(ctx, sync, f.finishing()); err != nil {
			return err
		}
		if !f.jsonOut {
			fmt.Fprintf(out, "rank 0 did the job's %s\n", f.finishing())
		}
		return nil
	}
	var notes []string
	err := shareOutcome(ctx, sync, func() (err error) {
		notes, err = work()
		return err
	})
	if !f.jsonOut {
		for _, n := range notes {
			fmt.Fprintln(out, n)
		}
	}
	return err
}

// finishing names what finish does: --export, --save or both.
func (f *kgeFlags) finishing() string {
	var what []string
	if f.export != "" {
		what = append(what, "--export")
	}
	if f.save {
		what = append(what, "--save")
	}
	return strings.Join(what, " and ")
}

// checkTrained refuses --epochs 0 on tables that no job trained: it
// evaluates and exports the tables as they are (dglke_eval's job), and
// on tables that kv_create had just made, without [kv] load or under a
// mistyped --table-prefix, it exported random rows and a config.json
// that read as a trained model's, and exited 0. A node's shard of the
// entity table at version 0 has had no push (a trained one has: each
// part's trainer pushes its own heads' rows) nor been loaded at a later
// one; the trainers share what their nodes say (a client node cannot
// say), and all refuse, rank 0 dropping the tables made for nothing.
func (f *kgeFlags) checkTrained(ctx context.Context, kvc *client.KV, sync *client.Sync, ent *control.TableInfo, clientNode bool) error {
	untrained := 0
	if !clientNode && ent.Version == 0 {
		untrained = 1
	}
	n, err := sync.Share(ctx, untrained)
	if err != nil {
		return fmt.Errorf("--epochs 0: compare with the job's other trainers whether the tables hold trained rows: %w", err)
	}
	if n == 0 {
		return nil
	}
	dropped := "rank 0 drops the tables this run made"
	if f.cfg.Rank == 0 {
		var errs []error
		for _, name := range []string{f.prefix + ".entity", f.prefix + ".relation", f.kgeModelTable()} {
			if _, err := kvc.Drop(ctx, name); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		}
		dropped = "the tables this run made are dropped again"
		if err := errors.Join(errs...); err != nil {
			dropped = fmt.Sprintf("dropping the tables this run made failed (%v): %s removes them", err, f.dropCommand())
		}
	}
	return fmt.Errorf("--epochs 0 evaluates and exports the kv tables %s.entity and %s.relation as they are, but no job trained them: they hold their initial, random rows (--table-prefix %q names tables that no job on these nodes trained, and no checkpoint of them was loaded). "+
		"Pass the --table-prefix of the job that trained them, or, for the --save of a job on nodes restarted since, set [kv] load = true in their node.toml and restart them; %s",
		f.prefix, f.prefix, f.prefix, dropped)
}
