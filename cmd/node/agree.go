package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"graphnode/kv"
	"graphnode/node/client"
	"graphnode/train"
)

// agreeJob has the job's trainers compare the settings that must be the
// same on all of them (client.Sync.Agree), in the rounds before their
// first step, and refuses a job whose trainers were started with
// different ones, on every trainer alike. Without it a rank with another
// --seed trained a model of its own under averaged gradients, and one
// with another --epochs or --eval-every ran rounds the others did not
// (a gradient averaged with evaluation counts, or a wait to the
// timeout). follows maps a setting this trainer was not given but
// derived to the flag it follows from (--steps-per-epoch 0 from
// --batch-size): when both differ only the flag is named, as the cause;
// the derived one alone says where it came from.
func agreeJob(ctx context.Context, s *client.Sync, set []client.Setting, follows map[string]string) error {
	differ, err := s.Agree(ctx, set)
	if errors.Is(err, kv.ErrStepFailed) {
		// A trainer that fails before it joins (a flag that makes its
		// sync table another size, missing input files) stops at once
		// and alone: the others only see it missing, a minute later.
		return fmt.Errorf("compare the job's settings with its other trainers: %w (a trainer missing from the comparison stopped before it, and its own output says why, was never started, or was slower to get there than [kv] sync_timeout)", err)
	}
	if err != nil {
		return fmt.Errorf("compare the job's settings with its other trainers: %w", err)
	}
	if len(differ) > 0 {
		hint := "compare the command lines of its ranks"
		if slices.Contains(differ, layoutSetting) {
			hint = "run the same node build on every host: a trainer of another build reads the job's rounds otherwise"
		}
		return fmt.Errorf("the trainers of this job were started with different %s: every trainer of a job needs the same (%s)", strings.Join(differNames(differ, follows), ", "), hint)
	}
	return nil
}

// layoutSetting names train.SyncLayout among a job's settings: first, so
// that a trainer of an earlier build, which lists no such setting, is
// told apart at once.
const layoutSetting = "node build (the layout of its trainers' rounds)"

// withLayout is set with train.SyncLayout before it.
func withLayout(set ...client.Setting) []client.Setting {
	return append([]client.Setting{setting(layoutSetting, train.SyncLayout)}, set...)
}

// differNames is the settings of differ to name (see agreeJob).
func differNames(differ []string, follows map[string]string) []string {
	var names []string
	for _, d := range differ {
		from, ok := follows[d]
		switch {
		case ok && slices.Contains(differ, from):
			continue
		case ok:
			d += " (which this trainer derived from " + from + ")"
		}
		names = append(names, d)
	}
	return names
}

// The states rank 0 offers in shareOutcome's rounds; the other ranks
// offer 0, so that a round's sum is rank 0's state.
const (
	outcomeWorking = 0
	outcomeDone    = 1
	outcomeFailed  = 2
)

// outcomePace is how often rank 0 runs a round of shareOutcome while its
// work goes on: far below any [kv] sync_timeout, which the other ranks'
// pushes, made at once, wait for rank 0's within.
const outcomePace = 250 * time.Millisecond

// shareOutcome is rank 0's side of work that it alone does once training
// is over (--save, --export): it runs work while it tells the job's
// other ranks, in rounds of the sync table, that it is still at it, and
// then whether it succeeded (awaitOutcome). Each round waits for every
// rank, so a rank that went away fails it at once and one that never
// comes at the node's sync_timeout; rank 0 then finishes work all the
// same and returns its error: the others hear nothing more.
func shareOutcome(ctx context.Context, s *client.Sync, work func() error) error {
	done := make(chan error, 1)
	go func() { done <- work() }()
	var werr error
	finished := false
	for {
		if !finished {
			t := time.NewTimer(outcomePace)
			select {
			case werr = <-done:
				finished = true
			case <-t.C:
			}
			t.Stop()
		}
		state := outcomeWorking
		switch {
		case finished && werr == nil:
			state = outcomeDone
		case finished:
			state = outcomeFailed
		}
		if _, err := s.Share(ctx, state); err != nil {
			if !finished {
				werr = <-done
			}
			return werr
		}
		if finished {
			return werr
		}
	}
}

// awaitOutcome is the side of shareOutcome of a rank other than 0: it
// waits for rank 0's work (what names the flag that asked for it) and
// fails when that failed, so that every rank of the job ends alike.
func awaitOutcome(ctx context.Context, s *client.Sync, what string) error {
	for {
		state, err := s.Share(ctx, 0)
		if err != nil {
			return fmt.Errorf("%s: rank 0, which does the job's %s once training is over, stopped before it said whether that succeeded (its output says why): %w", what, what, err)
		}
		switch state {
		case outcomeWorking:
		case outcomeDone:
			return nil
		default:
			return fmt.Errorf("%s: rank 0, which does the job's %s once training is over, failed at it: its output says why", what, what)
		}
	}
}

// setting is a client.Setting of a number or a flag's value.
func setting[T int | uint64 | bool | string | float64](name string, v T) client.Setting {
	switch x := any(v).(type) {
	case float64:
		return client.Setting{Name: name, Value: strconv.FormatFloat(x, 'g', -1, 64)}
	default:
		return client.Setting{Name: name, Value: fmt.Sprint(x)}
	}
}

// trainSettings are what every GraphSAGE trainer of a job must share:
// the model, its optimiser and seed, and the rounds it runs (epochs,
// evaluations, early stop).
func trainSettings(cfg train.Config, f *trainFlags, fan, evalFan []int) []client.Setting {
	return withLayout(
		setting("--fanouts", fmt.Sprint(fan)), setting("--eval-fanouts", fmt.Sprint(evalFan)),
		setting("--batch-size", f.batch), setting("--eval-batch-size", f.evalBatch),
		setting("--epochs", cfg.Epochs), setting("--hidden", cfg.Hidden), setting("--layers", cfg.Layers),
		setting("--dropout", cfg.Dropout), setting("--input-dropout", cfg.InputDropout), setting("--normalize", cfg.Normalize),
		setting("--lr", cfg.LR), setting("--weight-decay", cfg.WeightDecay), setting("--seed", cfg.Seed),
		setting("--eval", f.eval), setting("--eval-every", cfg.EvalEvery), setting("--patience", cfg.Patience),
		// Rank 0 alone saves: a --save given to another rank only saved
		// nothing, without a word.
		setting("--save", f.save),
		// Rank 0 stores the parameters in its own; a rank given another
		// said they were saved in that one.
		setting("--params-table", savedTable(f)),
		// Rank 0 stores its choice of epoch; every rank prints it.
		setting("--save-best", cfg.KeepBest),
		// Not the batches per epoch: ranks whose shares of the split
		// differ by a seed may differ by a batch, and the trainer keeps
		// them in step.
	)
}

// savedTable is the --params-table that --save stores the parameters
// in; without --save, where the flag is not used, its default, so that
// ranks that differ in --save alone are told so.
func savedTable(f *trainFlags) string {
	if !f.save {
		return defaultParamsTable
	}
	return f.paramsTable
}

// trainFollows is agreeJob's follows for node train: the flags this
// trainer was not given and derived from --fanouts (layersGiven: --layers
// was not 0).
func trainFollows(f *trainFlags, layersGiven bool) map[string]string {
	m := map[string]string{}
	if f.evalFanouts == "" {
		m["--eval-fanouts"] = "--fanouts"
	}
	if !layersGiven {
		m["--layers"] = "--fanouts"
	}
	return m
}

// kgeFollows is agreeJob's follows for node kge: --steps-per-epoch 0 is
// the largest part's triples over --batch-size.
func kgeFollows(f *kgeFlags) map[string]string {
	if f.cfg.StepsPerEpoch != 0 {
		return nil
	}
	return map[string]string{"--steps-per-epoch": "--batch-size"}
}

// kgeSettings are what every KGE trainer of a job must share: the model
// and its initialisation, the steps and their negatives, the evaluation,
// and the knowledge graph itself.
func kgeSettings(cfg train.KGEConfig, f *kgeFlags, in *kgeInput) []client.Setting {
	return withLayout(
		setting("--model", cfg.Model), setting("--hidden", cfg.Hidden), setting("--gamma", cfg.Gamma),
		setting("--lr", f.lr), setting("--seed", cfg.Seed),
		setting("--batch-size", cfg.BatchSize), setting("--neg-size", cfg.NegSize), setting("--neg-deg", cfg.NegDeg),
		setting("--adv-temp", cfg.AdvTemp), setting("--reg-coef", cfg.RegCoef), setting("--reg-norm", cfg.RegNorm),
		setting("--epochs", cfg.Epochs), setting("--steps-per-epoch", cfg.StepsPerEpoch),
		setting("--eval", f.eval), setting("--eval-sample", f.evalSample), setting("--eval-neg", cfg.EvalNeg),
		setting("--eval-batch", cfg.EvalBlock), setting("--eval-neg-deg", cfg.EvalNegDeg),
		setting("--eval-every", cfg.EvalEvery), setting("--eval-filter", in.filter != nil),
		// Rank 0 alone saves and exports (each into its own host's
		// directory): either given to another rank only did nothing.
		setting("--save", f.save), setting("--export (given or not)", f.export != ""),
		setting("entities (--parts)", cfg.Entities), setting("relations (--parts)", cfg.Relations),
		setting("evaluation triples (--parts, --eval, --eval-sample)", len(in.eval)),
	)
}
