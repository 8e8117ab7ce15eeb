package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"graphnode/kv"
	"graphnode/node/client"
)

// jobStage is where a trainer's job is, for trainerError.
type jobStage struct {
	// where the job is: "before its first epoch", "after epoch 3",
	// "during --save".
	where string
	// reached: the trainer reached its node (a socket that was never
	// there is no node that went away).
	reached bool
	// interrupted is what an interrupted trainer adds: what becomes of
	// the job.
	interrupted string
}

// inTraining is the stage of a job at where in its epochs: an
// interrupted trainer leaves the job's synchronous steps.
func inTraining(where string) jobStage {
	return jobStage{where: where, reached: true, interrupted: "the job's other trainers stop too, saying that this trainer left or is missing"}
}

// trainerError is what node train and node kge report for err, the
// error of a job at stage whose trainer talks to the node at socket and
// whose ctx a stop signal ends (main's signal.NotifyContext). A Ctrl-C
// read as a failure of kv ("sync step 53: client: kv push_sync: context
// canceled"), and a node that stopped or crashed under the trainer as a
// socket's ("write: broken pipe", "open_loader: EOF"). It exits 1, as
// node demo does when interrupted.
func trainerError(ctx context.Context, socket string, stage jobStage, err error) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		msg := fmt.Sprintf("interrupted by %s %s", stopSignal(ctx), stage.where)
		if stage.interrupted != "" {
			msg += ": " + stage.interrupted
		}
		if k, ok := errors.AsType[*paramsKept](err); ok {
			msg += "; " + k.kept()
		}
		return errors.New(msg)
	case stage.reached && strings.Contains(err.Error(), "node is stopping"):
		// Its drain (SIGTERM, or its terminal closed) cut the request.
		return fmt.Errorf("the node at %s is stopping (its log says why) %s: %w", socket, stage.where, err)
	case stage.reached && nodeGone(err, socket):
		return fmt.Errorf("the node at %s went away (stopped or crashed: its log says why) %s: %w", socket, stage.where, err)
	case errors.Is(err, kv.ErrStepFailed) && strings.Contains(err.Error(), " left; "):
		return fmt.Errorf("%w (a trainer that left stopped, was interrupted or failed: its own output says why)", err)
	}
	return err
}

// stopSignal names the signal that ended ctx, as main's
// signal.NotifyContext gives it (context.Cause: "interrupt signal
// received"); "a stop request" when ctx ended otherwise.
func stopSignal(ctx context.Context) string {
	cause := context.Cause(ctx)
	if cause == nil {
		return "a stop request"
	}
	name, ok := strings.CutSuffix(cause.Error(), " signal received")
	if !ok {
		return "a stop request"
	}
	switch name {
	case os.Interrupt.String():
		return "SIGINT (Ctrl-C)"
	case syscall.SIGTERM.String():
		return "SIGTERM"
	case syscall.SIGHUP.String():
		return "SIGHUP (its terminal closed)"
	}
	return "the signal " + name
}

// nodeGoneProbe bounds nodeGone's stats request.
const nodeGoneProbe = 2 * time.Second

// nodeGone reports whether err is a connection to the node at socket
// that broke (the node closed it, or is no longer there to dial) and the
// node does not answer a new one: stopped or crashed, not merely one
// connection's trouble.
func nodeGone(err error, socket string) bool {
	broke := false
	for _, e := range []error{syscall.EPIPE, syscall.ECONNRESET, syscall.ECONNREFUSED, syscall.ENOENT, io.EOF, io.ErrUnexpectedEOF} {
		broke = broke || errors.Is(err, e)
	}
	if !broke {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), nodeGoneProbe)
	defer cancel()
	_, serr := client.Stats(ctx, socket)
	return serr != nil
}
