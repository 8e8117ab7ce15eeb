package train

import (
	"log/slog"
	"math"
	"time"
)

// EpochStats is one epoch as Run reports it. Loss and accuracies are over
// all trainers (exchanged through Sync); counts and times are this
// trainer's.
type EpochStats struct {
	Epoch    int     // 0-based
	Loss     float64 // mean cross-entropy over the labelled training seeds
	TrainAcc float64 // accuracy on the training seeds, in training mode (dropout on)

	Evaluated       bool    // val and test were evaluated after this epoch
	ValAcc, TestAcc float64 // sampled inference, dropout off; valid when Evaluated

	Steps   int   // optimiser steps (rounds in which any trainer had a batch)
	Batches int   // this trainer's training batches
	Edges   int64 // sampled edges in them

	TrainTime time.Duration // the training pass: reading batches, compute, sync
	EvalTime  time.Duration // the evaluation pass
	GEMMTime  time.Duration // of TrainTime: dense products (forward and backward)
	AggTime   time.Duration // of TrainTime: mean aggregation and its adjoint
}

// BatchesPerSec is this trainer's training batches per second.
func (s EpochStats) BatchesPerSec() float64 { return perSec(float64(s.Batches), s.TrainTime) }

// EdgesPerSec is this trainer's sampled edges trained on per second.
func (s EpochStats) EdgesPerSec() float64 { return perSec(float64(s.Edges), s.TrainTime) }

func perSec(n float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return n / d.Seconds()
}

// LogValue lets a caller log the epoch as one group:
// logger.Info("epoch", "stats", s).
func (s EpochStats) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.Int("epoch", s.Epoch),
		slog.Float64("loss", round4(s.Loss)),
		slog.Float64("train_acc", round4(s.TrainAcc)),
	}
	if s.Evaluated {
		attrs = append(attrs, slog.Float64("val_acc", round4(s.ValAcc)), slog.Float64("test_acc", round4(s.TestAcc)))
	}
	return slog.GroupValue(append(attrs,
		slog.Int("batches", s.Batches),
		slog.Float64("batches_per_s", round4(s.BatchesPerSec())),
		slog.Float64("edges_per_s", math.Round(s.EdgesPerSec())),
		slog.Duration("train_time", s.TrainTime),
		slog.Duration("eval_time", s.EvalTime),
	)...)
}

func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

// Result is a whole run.
type Result struct {
	Epochs  []EpochStats
	Best    int  // index in Epochs of the best val accuracy (earliest of ties), −1 if none
	Stopped bool // early stopping ended the run before Config.Epochs
}

// BestEpoch is Epochs[Best], the zero EpochStats when nothing was
// evaluated.
func (r Result) BestEpoch() EpochStats {
	if r.Best < 0 {
		return EpochStats{Epoch: -1}
	}
	return r.Epochs[r.Best]
}
