package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"graphnode/kv"
	"graphnode/node/client"
	"graphnode/node/control"
)

// checkSave refuses --save before training when the node at socket says
// it has no kv.checkpoint_dir: kv_save failed only once training was
// over, and the trained tables were not saved. A node that does not say
// (a client node, whose sampling nodes save; an earlier build) is asked
// after training, as before.
func checkSave(st *control.Stats, socket string) error {
	if st.KV != nil && st.KV.CheckpointDir == "" {
		return fmt.Errorf("--save: the node at %s has no kv.checkpoint_dir, so kv_save would fail once training is over: set [kv] checkpoint_dir in its node.toml (on every sampling node) or leave out --save", socket)
	}
	return nil
}

// saveFailed is the error of --save's kv_save, which runs once training
// is over: a refusal there (a full disk, a table some nodes lack) read as
// if the job's training were lost, while the nodes hold it until they
// stop, and node kv save checkpoints it once the cause is fixed.
func saveFailed(err error, socket string) error {
	return fmt.Errorf("--save: %w (the nodes keep the trained kv tables while they run: once the cause is fixed, node kv save --socket %s checkpoints them)", err, socket)
}

// saveParams is node train --save once the last epoch is over. Rank 0
// alone stores the parameters and checkpoints every node's tables (every
// rank saving wrote the checkpoint world-size times over), while every
// rank waits for its outcome (shareOutcome): rank 0 failed there, after
// all the training, and the others exited 0 as if the job had saved.
// Parameters that cannot be stored in kv are kept in a file (keepParams):
// a refusal at that point lost the trained model.
func (f *trainFlags) saveParams(ctx context.Context, out io.Writer, sync *client.Sync, params []float32, which string) error {
	if f.cfg.Rank != 0 {
		if err := awaitOutcome(ctx, sync, "--save"); err != nil {
			return err
		}
		if !f.jsonOut {
			fmt.Fprintf(out, "rank 0 saved the trained parameters in kv table %q and checkpointed every kv table\n", f.paramsTable)
		}
		return nil
	}
	var note string
	err := shareOutcome(ctx, sync, func() error {
		replaced, err := storeParams(ctx, f.socket, f.paramsTable, params)
		if err != nil {
			path, kerr := keepParams(f.paramsTable, params)
			if kerr != nil {
				return fmt.Errorf("%w; nor could they be kept in a file: %v", err, kerr)
			}
			return &paramsKept{err, path}
		}
		si, err := saveTables(ctx, f.socket)
		if err != nil {
			return saveFailed(err, f.socket)
		}
		note = fmt.Sprintf("saved the %d %s parameters in kv table %q", len(params), which, f.paramsTable)
		if replaced {
			note += " (replacing the model of another size saved under that name)"
		}
		note += " and checkpointed every kv table into " + savedWhere(si.Dir, f.socket)
		return nil
	})
	if err == nil && !f.jsonOut {
		fmt.Fprintln(out, note)
	}
	return err
}

// paramsKept is the error of parameters that kv refused and keepParams
// kept in the file path: an interrupted trainer, whose message replaces
// err, says where they are too.
type paramsKept struct {
	err  error
	path string
}

func (e *paramsKept) Error() string {
	return fmt.Sprintf("%v; %s", e.err, e.kept())
}

func (e *paramsKept) Unwrap() error { return e.err }

// kept says where the parameters are.
func (e *paramsKept) kept() string {
	return fmt.Sprintf("the trained parameters are kept in %s (NumPy, float32, the rows --params-table would hold)", e.path)
}

// saveTables is kv_save on a connection of its own: the job's
// connection carries shareOutcome's rounds meanwhile, which a kv_save
// on it held back (a request holds the connection until its answer) for
// as long as the save took, past the others' [kv] sync_timeout.
func saveTables(ctx context.Context, socket string) (*control.SaveInfo, error) {
	kvc, err := client.DialKV(ctx, socket)
	if err != nil {
		return nil, err
	}
	defer kvc.Close()
	si, err := kvc.Save(ctx)
	if err != nil {
		return nil, err
	}
	return si, kvc.Done(ctx)
}

// storeParams writes params into kv table name (rows of client.SyncDim,
// the last one padded with zeros) for kv_save to checkpoint: the model
// lives in the trainer, and --save checkpointed only the sync table,
// whose rows hold the last round's averaged statistics. The table is a
// synchronous "average" table of one trainer, so a step sets its rows to
// exactly what was pushed. --save replaces the saved model: a table of
// an earlier model of another size under that name is dropped first, and
// its checkpoint files, which nodes with [kv] load = true load on every
// kv_create of the name, are left unloaded and replaced by the next
// kv_save (replaced says so). When the parameters cannot be stored in
// the table it made so, it drops it again (dropReplaced): kept, it held
// its initial rows, or part of a store, under the saved model's name,
// and the next kv_save, of any job, replaced the earlier model's files
// with them.
//
// It pushes on a connection of its own, which says kv_done at once: the
// table's one rank is then free for the next --save (last save wins),
// where the job's connection held it until the job's kv_save ended, and
// a second job saving meanwhile was refused as a second job on it.
func storeParams(ctx context.Context, socket, name string, params []float32) (replaced bool, err error) {
	kvc, err := client.DialKV(ctx, socket)
	if err != nil {
		return false, fmt.Errorf("--params-table %q: %w", name, err)
	}
	defer kvc.Close()
	defer func() {
		if err == nil {
			if err = kvc.Done(ctx); err != nil {
				err = fmt.Errorf("--params-table %q: %w", name, err)
			}
		}
	}()
	create := func() (*client.Sync, error) {
		s, err := client.NewSync(ctx, kvc, name, len(params), 0, 1)
		if !errors.Is(err, kv.ErrMismatch) {
			return s, err
		}
		// A node's checkpoint of the table does not match it: with
		// [kv] load, every kv_create of the name loads it. One of an
		// earlier model of another size (rows alone differ) is replaced
		// by the save; any other is refused again.
		if _, err := kvc.CreateReplacingResized(ctx, client.SyncSpec(name, len(params))); err != nil {
			if errors.Is(err, kv.ErrMismatch) {
				err = fmt.Errorf("%w: the nodes' checkpoint of kv table %q is not of parameters that node train --save stored (those differ in rows alone), and it stays as it is: pass another --params-table, or move its files aside in the nodes' [kv] checkpoint_dir", err, name)
			}
			return nil, err
		}
		replaced = true
		return client.NewSync(ctx, kvc, name, len(params), 0, 1)
	}
	s, err := create()
	if err != nil && tableClash(err) {
		// Only a table that differs in length alone is one of ours: any
		// other (a user's embedding table given as --params-table) was
		// dropped, checkpoint included, and its rows lost.
		if f := kv.SpecFields(err); len(f) == 0 || slices.ContainsFunc(f, func(f string) bool { return f != "rows" && f != "bounds" }) {
			return false, fmt.Errorf("--params-table %q: %w: it is not a table of parameters that node train --save stored (those differ in rows alone), and it stays as it is: pass another --params-table", name, err)
		}
		if _, err := kvc.Drop(ctx, name); err != nil {
			return false, fmt.Errorf("--params-table %q: drop the earlier model's table: %w", name, err)
		}
		replaced = true
		s, err = create()
	}
	if err == nil {
		err = s.AllReduce(ctx, 0, slices.Clone(params))
	}
	if err != nil {
		err = fmt.Errorf("--params-table %q: store the trained parameters: %w", name, err)
		if replaced {
			err = fmt.Errorf("%w; %s", err, dropReplaced(ctx, socket, name))
		}
		return false, err
	}
	return replaced, nil
}

// dropReplacedTimeout bounds dropReplaced's kv_drop, which runs when
// the job's context has ended too (Ctrl-C).
const dropReplacedTimeout = 10 * time.Second

// dropReplaced drops kv table name, which storeParams made in place of
// an earlier model of another size and could not store the parameters
// in, on a connection of its own (the job's may have broken), and says
// what became of it.
func dropReplaced(ctx context.Context, socket, name string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dropReplacedTimeout)
	defer cancel()
	kvc, err := client.DialKV(ctx, socket)
	if err == nil {
		defer kvc.Close()
		_, err = kvc.Drop(ctx, name)
	}
	if err != nil {
		return fmt.Sprintf("dropping the table of the new size that --save made in place of the earlier model failed (%v): node kv drop --socket %s %s removes it, and until then a kv_save replaces the earlier model's checkpoint files with its rows", err, socket, name)
	}
	return "the table of the new size that --save made in place of the earlier model is dropped again, and the nodes' checkpoint files of the earlier model stay as they were"
}

// keepParams writes params, which could not be stored in kv table name,
// into a new file of the temporary directory as a NumPy array of the
// table's rows (client.SyncDim wide, the last padded with zeros), and
// returns its path.
func keepParams(name string, params []float32) (string, error) {
	rows := (len(params) + client.SyncDim - 1) / client.SyncDim
	padded := make([]float32, rows*client.SyncDim)
	copy(padded, params)
	f, err := os.CreateTemp("", "graphnode-"+name+"-*.npy")
	if err != nil {
		return "", err
	}
	if _, err = f.Write(npy(padded, rows, client.SyncDim)); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}
