package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"graphnode/kv"
)

// TestTrainPatience: a run that --patience stops early says so in table
// mode, naming the epoch it stopped after and the best one; only --json
// said it ("stopped": true), and the table read as cut short. The
// learning rate is too small for the val accuracy (all neighbours: no
// sampling) to move, so the second evaluation is no better than the
// first.
func TestTrainPatience(t *testing.T) {
	bin := nodeBinary(t)
	parts := smallParts(t, 2000, 16, "10,5")
	cl := testCluster(t, bin, parts)
	res := runJob(t, bin, 1, func(int) []string {
		return []string{"train", "--socket", cl.sockets[0], "--fanouts", "10,5", "--eval-fanouts", "-1,-1", "--batch-size", "64",
			"--hidden", "8", "--epochs", "50", "--patience", "1", "--lr", "1e-12", "--workers", "1", "--threads", "1"}
	})[0]
	want := "stopped early after epoch 1 of --epochs 50: no better val accuracy than epoch 0's in the 1 evaluation since (--patience 1)\nbest epoch 0: val "
	if res.err != nil || !strings.Contains(res.out, want) {
		t.Errorf("node train --patience 1: %v, output:\n%s\nwant %q", res.err, res.out, want)
	}
}

// stopJob starts a two-rank node train job of many epochs on cl, its
// gradients averaged in sync table table, waits
// for both ranks' first epoch, runs stop, and returns each rank's exit
// and stderr, once rank 0 ends and rank 1 too (rank1), or is killed.
func stopJob(t *testing.T, bin string, cl *demoCluster, table string, stop func(trs []*trainer), rank1 bool) ([]error, []string) {
	t.Helper()
	var trs []*trainer
	for r := range 2 {
		trs = append(trs, startTrainer(t, bin, "--socket", cl.sockets[r], "--rank", strconv.Itoa(r), "--world-size", "2", "--fanouts", "10,5",
			"--batch-size", "16", "--hidden", "8", "--epochs", "5000", "--workers", "1", "--threads", "1", "--table", table))
	}
	for r, tr := range trs {
		if _, ok := <-tr.lines; !ok {
			t.Fatalf("rank %d ended before its first epoch: %v\n%s", r, <-tr.done, &tr.stderr)
		}
	}
	stop(trs)
	errs, stderrs := make([]error, 2), make([]string, 2)
	for r, tr := range trs {
		if r == 1 && !rank1 {
			tr.cmd.Process.Kill()
		}
		for range tr.lines {
		}
		errs[r], stderrs[r] = <-tr.done, tr.stderr.String()
	}
	return errs, stderrs
}

// TestTrainInterrupted: a trainer stopped by Ctrl-C or SIGTERM says so,
// naming the signal and the epoch, and exits 1, as node demo does; the
// other rank says that the trainer that left has its own output. It said
// "train: epoch 2: sync step 53: client: kv push_sync: context canceled".
func TestTrainInterrupted(t *testing.T) {
	bin := nodeBinary(t)
	parts := smallParts(t, 2000, 16, "10,5")
	cl := testCluster(t, bin, parts)
	for _, c := range []struct {
		sig  syscall.Signal
		name string
	}{{syscall.SIGINT, "SIGINT (Ctrl-C)"}, {syscall.SIGTERM, "SIGTERM"}} {
		errs, stderrs := stopJob(t, bin, cl, "int"+c.sig.String()[3:], func(trs []*trainer) { trs[0].cmd.Process.Signal(c.sig) }, true)
		want := regexp.MustCompile(`^node train: interrupted by ` + regexp.QuoteMeta(c.name) + ` after epoch \d+: the job's other trainers stop too, saying that this trainer left or is missing\n$`)
		var exit *exec.ExitError
		if !errors.As(errs[0], &exit) || exit.ExitCode() != 1 || !want.MatchString(stderrs[0]) {
			t.Errorf("rank 0 stopped by %s: %v, stderr:\n%s\nwant exit 1 and %s", c.name, errs[0], stderrs[0], want)
		}
		if want := ": synchronous step failed (a trainer that left stopped, was interrupted or failed: its own output says why)\n"; errs[1] == nil || !strings.Contains(stderrs[1], "trainer 0 left") || !strings.HasSuffix(stderrs[1], want) {
			t.Errorf("rank 1 beside rank 0 stopped by %s: %v, stderr:\n%s\nwant %q", c.name, errs[1], stderrs[1], want)
		}
	}
}

// TestTrainNodeGone: a trainer whose node stops (SIGTERM) under it says
// that the node at its socket is stopping, and one whose node is killed
// that it went away; they said "client: node is stopping: the request
// was cut", and "kv pull: EOF" or "write: broken pipe".
func TestTrainNodeGone(t *testing.T) {
	bin := nodeBinary(t)
	parts := smallParts(t, 2000, 16, "10,5")
	cl := testCluster(t, bin, parts)
	for _, c := range []struct {
		sig  syscall.Signal
		says string
	}{
		// Its drain cuts the trainer's request, or it is gone by the
		// trainer's next one.
		{syscall.SIGTERM, `(is stopping \(its log says why\)|went away \(stopped or crashed: its log says why\))`},
		{syscall.SIGKILL, `went away \(stopped or crashed: its log says why\)`},
	} {
		sig := c.sig
		errs, stderrs := stopJob(t, bin, cl, "gone"+strconv.Itoa(int(sig)), func([]*trainer) { cl.procs[0].Process.Signal(sig) }, false)
		want := regexp.MustCompile(`(?m)^node train: the node at ` + regexp.QuoteMeta(cl.sockets[0]) + " " + c.says + ` after epoch \d+: `)
		if errs[0] == nil || !want.MatchString(stderrs[0]) {
			t.Errorf("rank 0 whose node got %v: %v, stderr:\n%s\nwant %s", sig, errs[0], stderrs[0], want)
		}
		// Node 0 again, for the next round and the cleanup (a killed
		// node's rings go at its next start).
		if err := <-cl.exited[0]; (err == nil) != (sig == syscall.SIGTERM) {
			t.Fatalf("node 0 after %v: %v", sig, err)
		}
		if err := cl.start(0, nil); err != nil {
			t.Fatal(err)
		}
		if err := cl.waitReady(t.Context(), 60*time.Second); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTrainerError: what node train and node kge say of an error, by
// what ended the job: a stop signal, named, whatever the error it left
// (a cancelled kv call); a node that went away, when the trainer had
// reached it and a new connection finds none; a node that stopping cut
// a request; a step failed by a trainer that left. Other errors, and a
// socket that was never reached, are left as they are.
func TestTrainerError(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "gone.sock")
	pipe := fmt.Errorf("client: kv push_sync: control: write: %w", &net.OpError{Op: "write", Net: "unix", Err: os.NewSyscallError("write", syscall.EPIPE)})
	signalled := func(sig string) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(errors.New(sig + " signal received"))
		return ctx
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	left := fmt.Errorf(`client: kv: parts 0, 1: table "s" step 12: trainer 0 left; missing trainers [0]: %w`, kv.ErrStepFailed)
	stopping := errors.New("client: node is stopping: the request was cut")
	for _, c := range []struct {
		name  string
		ctx   context.Context
		stage jobStage
		err   error
		want  string
	}{
		{"SIGINT", signalled("interrupt"), inTraining("after epoch 3"), context.Canceled,
			"interrupted by SIGINT (Ctrl-C) after epoch 3: the job's other trainers stop too, saying that this trainer left or is missing"},
		{"SIGTERM while saving", signalled("terminated"), jobStage{where: "during --save", reached: true, interrupted: "not known"}, pipe,
			"interrupted by SIGTERM during --save: not known"},
		{"SIGTERM, parameters kept", signalled("terminated"), jobStage{where: "during --save", reached: true, interrupted: "not known"}, &paramsKept{context.Canceled, "/tmp/p.npy"},
			"interrupted by SIGTERM during --save: not known; the trained parameters are kept in /tmp/p.npy (NumPy, float32, the rows --params-table would hold)"},
		{"SIGHUP", signalled("hangup"), jobStage{where: "before its first epoch"}, context.Canceled, "interrupted by SIGHUP (its terminal closed) before its first epoch"},
		{"cancelled", cancelled, inTraining("after epoch 0"), context.Canceled, "interrupted by a stop request after epoch 0: the job's other trainers stop too, saying that this trainer left or is missing"},
		{"node gone", context.Background(), inTraining("after epoch 1"), pipe,
			"the node at " + gone + " went away (stopped or crashed: its log says why) after epoch 1: " + pipe.Error()},
		{"never reached", context.Background(), jobStage{where: "before its first epoch"}, pipe, pipe.Error()},
		{"node stopping", context.Background(), inTraining("after epoch 2"), stopping,
			"the node at " + gone + " is stopping (its log says why) after epoch 2: " + stopping.Error()},
		{"trainer left", context.Background(), inTraining("after epoch 2"), left,
			left.Error() + " (a trainer that left stopped, was interrupted or failed: its own output says why)"},
		{"other", context.Background(), inTraining("after epoch 2"), errors.New("train: NaN loss"), "train: NaN loss"},
	} {
		if got := trainerError(c.ctx, gone, c.stage, c.err); got == nil || got.Error() != c.want {
			t.Errorf("%s: %v\nwant %s", c.name, got, c.want)
		}
	}
	if err := trainerError(context.Background(), gone, inTraining("x"), nil); err != nil {
		t.Errorf("no error: %v", err)
	}
}
