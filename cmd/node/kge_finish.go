package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
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
// say), and all refuse when one node's shard is untrained.
//
// Rank 0 drops the tables again only when every part's node said its
// shard is untrained and this run made them (some rank's kv_create of
// them answered created: the ranks' creates race, and the one whose
// node made a table first forwards it to the others, which answer it
// exists). A node restarted without [kv] load makes its shard afresh at
// version 0 beside peers that kept their trained ones, unsaved: dropping
// the tables there deleted the peers' training, so then nothing is
// dropped, and the error says that a node lost its shard. Tables that
// were on the nodes before this run stay too (another job's, say).
func (f *kgeFlags) checkTrained(ctx context.Context, kvc *client.KV, sync *client.Sync, ent *control.TableInfo, made, clientNode bool) error {
	one := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	untrained, err := sync.Share(ctx, one(!clientNode && ent.Version == 0))
	if err != nil {
		return fmt.Errorf("--epochs 0: compare with the job's other trainers whether the tables hold trained rows: %w", err)
	}
	if untrained == 0 {
		return nil
	}
	trained, err := sync.Share(ctx, one(!clientNode && ent.Version > 0))
	makers := 0
	if err == nil {
		makers, err = sync.Share(ctx, one(made))
	}
	if err != nil {
		return fmt.Errorf("--epochs 0: %d of the job's %d parts' nodes hold the tables %s.entity and %s.relation at their initial rows, and comparing further with the job's other trainers failed: %w",
			untrained, f.cfg.World, f.prefix, f.prefix, err)
	}
	if untrained < f.cfg.World {
		return f.lostShard(untrained, trained, ent, clientNode)
	}
	dropped := "rank 0 drops the tables this run made"
	switch {
	case makers == 0:
		dropped = "the tables were on the nodes before this run, which leaves them as they are: " + f.dropCommand() + " removes them"
	case f.cfg.Rank == 0:
		var errs []error
		for _, name := range f.jobTables() {
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

// lostShard is checkTrained's error when the nodes of some parts hold
// the tables at their initial rows (untrained of them) and the others
// hold trained rows (trained of them) or, asked through a client node,
// cannot say: a node restarted without [kv] load lost its shard, and its
// initial rows would be evaluated and exported beside the others' as
// trained ones. Nothing is dropped: the others' rows may be the only
// copy of their training.
func (f *kgeFlags) lostShard(untrained, trained int, ent *control.TableInfo, clientNode bool) error {
	mine := "is at its initial rows"
	switch {
	case clientNode:
		mine = "is asked through a client node, which cannot say"
	case ent.Version > 0:
		mine = "holds trained rows"
	}
	others := fmt.Sprintf("the nodes of %d hold trained rows", trained)
	why := "a node restarted without [kv] load made its shard afresh and lost what it held"
	if unknown := f.cfg.World - untrained - trained; unknown > 0 {
		others = fmt.Sprintf("the nodes of %d hold trained rows and %d, asked through client nodes, cannot say", trained, unknown)
		if trained == 0 {
			why = "either no job trained them (--table-prefix " + strconv.Quote(f.prefix) + " names tables that no job on these nodes trained) or " + why
		}
	}
	return fmt.Errorf("--epochs 0 evaluates and exports the kv tables %s.entity and %s.relation as they are, but the nodes of %d of the job's %d parts hold them at their initial, random rows while %s (part %d, this trainer's, %s): "+
		"%s, and its random rows would be evaluated and exported as trained ones. Nothing is dropped. "+
		"If a --save checkpointed the tables, restarting the nodes with [kv] load = true loads it back; otherwise what those parts trained is lost: "+
		"train the job again (node kge without --epochs 0 goes on from the rows the nodes hold), or drop the tables with %s and start afresh",
		f.prefix, f.prefix, untrained, f.cfg.World, others, f.cfg.Rank, mine, why, f.dropCommand())
}
