package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"graphnode/node"
)

// runSampler is `node sampler`, internal: `node run` starts one per
// worker of a loader, with the worker's spec as JSON on stdin.
func runSampler(ctx context.Context, a *app, args []string) error {
	// Our stderr is the node's (startProc passes its descriptor), so its
	// reader goes when the node's does, and the node's handler does not
	// survive exec: each sampler handles SIGPIPE itself. Else it died of SIGPIPE at its
	// "sampler stopped" line, and the trainer read a dead sampler instead
	// of end-of-stream. (The node could copy our stderr through a pipe
	// of its own instead, but then it must read it to the end, drain
	// included, or we block on a log line.)
	surviveClosedOutput()
	fs := newFlagSet(a, "sampler", "< spec.json\n\n"+
		"Internal: `node run` starts this process, one per loader worker, and\n"+
		"writes its spec (partition, ring, worker, loader options) as JSON on\n"+
		"stdin. It samples its share of the batches into its sub-ring and\n"+
		"reports progress, and the error it fails with, on stdout. Not meant to\n"+
		"be run by hand.")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	// First, before the spec and the mapped part file make us large: the
	// OOM killer is to take a sampler (one loader fails) before its node
	// (every loader of the host ends).
	adj, adjErr := node.RaiseOOMScoreAdj(node.SamplerOOMScoreAdj)
	err := sampler(ctx, a, adj, adjErr)
	if err == nil {
		return nil
	}
	// The node logs our error with our exit status, in its own log
	// format: printed on stderr, the node's log, it was a line of plain
	// text in a JSON journal, and the node's record lacked the cause.
	if rerr := node.ReportSamplerError(a.stdout, err); rerr != nil {
		return err // no node reads us: stderr, then
	}
	return reportedError{err}
}

// sampler reads the spec on stdin and samples it; adj and adjErr are
// what raising our oom_score_adj gave, logged once the log is set up.
func sampler(ctx context.Context, a *app, adj int, adjErr error) error {
	spec, err := node.ReadSamplerSpec(os.Stdin)
	if err != nil {
		return err
	}
	var crashErr error
	if spec.CrashFD != 0 {
		crashErr = node.SetSamplerCrashOutput(spec.CrashFD)
	}
	level, err := node.ParseLevel(spec.LogLevel)
	if err != nil {
		return fmt.Errorf("sampler spec: %w", err)
	}
	log := slog.New(newHandler(a.stderr, level, resolveLogFormat(spec.LogFormat, a.stderr))).
		With("loader", spec.LoaderID, "worker", spec.Worker)
	routeStdLog(log.Handler())
	if crashErr != nil {
		log.Warn("sampler crash reports reach its node's log only as text on stderr", "err", crashErr)
	}
	if adjErr != nil {
		log.Warn("sampler keeps its node's oom_score_adj: the OOM killer may pick the node before it", "err", adjErr)
	} else {
		log.Debug("sampler started", "oom_score_adj", adj)
	}
	return node.RunSampler(ctx, spec, log, a.stdout)
}
