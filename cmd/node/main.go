// Command node is graphnode's single binary: the daemon, its sampler
// children, and the offline tools (gen, partition, inspect).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"graphnode/node"
)

// command is one subcommand. run gets the arguments after the subcommand
// name and returns an error to print; flag.ErrHelp means usage was shown.
type command struct {
	summary string
	run     func(ctx context.Context, app *app, args []string) error
}

// app is what every subcommand shares: streams, the logger and what the
// machine has.
type app struct {
	stdout, stderr io.Writer
	log            *slog.Logger
	// memory is the machine's memory plus swap in bytes, 0 when unknown
	// (node.MachineMemory; tests pose as a smaller machine).
	memory func() uint64

	// aborts run when a second stop signal ends the process (onAbort).
	abortMu sync.Mutex
	aborts  []func()
}

// abortTimeout bounds what onAbort's functions may take once a second
// stop signal came: the process then ends whether they are done or not.
const abortTimeout = 2 * time.Second

// onAbort registers fn to run if a second stop signal ends the process
// before the command returns: what must not outlive it even then (a
// node's rings on a tmpfs). fn must be quick and safe to call while the
// command runs.
func (a *app) onAbort(fn func()) {
	a.abortMu.Lock()
	defer a.abortMu.Unlock()
	a.aborts = append(a.aborts, fn)
}

// abort runs the functions onAbort registered, last first.
func (a *app) abort() {
	a.abortMu.Lock()
	defer a.abortMu.Unlock()
	for i := len(a.aborts) - 1; i >= 0; i-- {
		a.aborts[i]()
	}
}

// abortWithin runs abort for at most d and reports whether it ended: a
// function stuck on a wedged disk must not keep the process alive, which
// is what the second signal is for.
func (a *app) abortWithin(d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		a.abort()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// newApp is the app of a command line writing to stdout and stderr.
func newApp(stdout, stderr io.Writer) *app {
	return &app{stdout: stdout, stderr: stderr, log: newLogger(stderr), memory: node.MachineMemory}
}

func commands() map[string]command {
	return map[string]command{
		"gen":       {"generate a synthetic graph (R-MAT, stochastic block model)", runGen},
		"partition": {"partition a graph into a parts/ directory", runPartition},
		"inspect":   {"describe (and verify) a parts/ directory", runInspect},
		"run":       {"run the daemon: serve this host's partition to trainers (-c node.toml)", runRun},
		"fetch":     {"fetch this host's partition files (graph.toml, its part) from the peers of node.toml", runFetch},
		"sampler":   {"internal: one sampler process of a loader, started by node run", runSampler},
		"config":    {"check a node.toml and print the effective configuration", runConfig},
		"cert":      {"create the cluster CA and node certificates for the mesh (cert init), or one more node's (cert add)", runCert},
		"train":     {"train GraphSAGE on the cluster: batches from this host's node, gradients averaged in kv", runTrain},
		"kge":       {"train knowledge-graph embeddings (TransE, DistMult, ComplEx, RotatE, RESCAL, SimplE, TransR) on the cluster, tables in kv", runKGE},
		"kv":        {"drop parameter-server tables from the cluster (kv drop), or checkpoint them all (kv save)", runKV},
		"demo":      {"train GraphSAGE on a two-node cluster on loopback over a generated graph", runDemo},
		"version":   {"print the build (commit) and the version of every file format and protocol", runVersion},
	}
}

func main() {
	// SIGHUP (the terminal of a `node run` or `node demo` went away: an
	// ssh session dropped) stops as SIGTERM does: its default action
	// killed the node without its kv checkpoint, and the demo without
	// removing its processes' rings and its work directory. Unless it is
	// ignored (nohup): asking for it would undo that.
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	ctx, stop := signal.NotifyContext(context.Background(), sigs...)
	a := newApp(os.Stdout, os.Stderr)
	if secondSignalEnds(os.Args[1:]) {
		// The first signal asks the command to stop; the second ends the
		// process by that signal, as without a handler: a command stuck
		// where it does not look at ctx (an open of a FIFO nobody
		// writes, a wedged disk) ignored every later Ctrl-C and SIGTERM.
		// What the command registered with onAbort runs first: a node
		// stopped so left its rings (1 GB of tmpfs each by default) and
		// its socket until its next start.
		go func() {
			<-ctx.Done()
			second := make(chan os.Signal, 1)
			signal.Notify(second, sigs...)
			stop()
			sig := <-second
			a.abortWithin(abortTimeout)
			signal.Reset(sigs...)
			if s, ok := sig.(syscall.Signal); ok {
				syscall.Kill(os.Getpid(), s)
				time.Sleep(time.Second) // the runtime's handler ends the process meanwhile
			}
			os.Exit(1)
		}()
	}
	code := a.run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// secondSignalEnds reports whether a second stop signal ends the command
// line args at once. Not for a sampler: its node stops it with SIGTERM
// (SIGKILL after the drain timeout), and the Ctrl-C or hangup that stops
// a node run in a terminal reaches its samplers too (one process group),
// so the node's SIGTERM is their second signal and would cut the batch
// in hand.
func secondSignalEnds(args []string) bool {
	return len(args) == 0 || args[0] != "sampler"
}

// surviveClosedOutput makes a write to stdout or stderr whose reader has
// gone (the cat of `node run 2>&1 | cat`) fail with EPIPE instead of
// ending the process: Go ends a program by SIGPIPE at such a write to fd
// 1 or 2 unless SIGPIPE is notified or ignored. Notified rather than
// ignored, since exec keeps an ignored signal ignored in the processes
// the command starts, and a handler is reset there. Nothing reads the
// channel: a signal finding it full is dropped. It lasts until the
// process exits: the error printed on the way out may fail too.
func surviveClosedOutput() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return newApp(stdout, stderr).run(ctx, args)
}

// run runs the command line args (the subcommand first) and returns the
// process's exit code.
func (a *app) run(ctx context.Context, args []string) int {
	stderr := a.stderr
	cmds := commands()
	if len(args) > 1 && args[0] == "help" && args[1] != "help" {
		// node help CMD [SUB]: CMD's own help, as node CMD [SUB] --help
		// prints it (it printed the list of commands).
		if _, ok := cmds[args[1]]; !ok {
			fmt.Fprintf(stderr, "node help: unknown command %q\n\n", args[1])
			usage(stderr, cmds)
			return 2
		}
		args = append(args[1:len(args):len(args)], "--help")
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		args = append([]string{"version"}, args[1:]...)
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "node: unknown command %q\n\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	err := c.run(ctx, a, args[1:])
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.As(err, new(reportedError)):
		return 1
	}
	if stoppedQuietly[args[0]] && errors.Is(err, context.Canceled) && ctx.Err() != nil {
		// It said "node partition: context canceled" alone.
		fmt.Fprintf(stderr, "node %s: stopped by %s: %v\n", args[0], stopSignal(ctx), err)
		return 1
	}
	fmt.Fprintf(stderr, "node %s: %v\n", args[0], err)
	if errors.As(err, new(usageError)) {
		return 2
	}
	if errors.As(err, new(configError)) {
		return exitConfig
	}
	return 1
}

// stoppedQuietly are the commands whose stop by a signal ends in a bare
// context error: the others (run, train, kge, demo, fetch) say what
// stopped them, and what they leave, themselves.
var stoppedQuietly = map[string]bool{"partition": true, "gen": true, "inspect": true}

// errUsage marks an error already reported as a usage message.
var errUsage = errors.New("usage")

// reportedError is an error the command reported itself, where it is
// read (a sampler's, to its node): it exits 1, and is not printed again.
type reportedError struct{ error }

func (e reportedError) Unwrap() error { return e.error }

// usageError is a flag of a bad value, found before any work: printed as
// any other error, it exits 2, as a flag that does not parse does (1 is
// for what goes wrong with the input, the output or the cluster).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// badFlags marks err as a usage error; nil stays nil.
func badFlags(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: node <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'node help <command>' or 'node <command> --help' for the flags of a command.")
}

// newFlagSet returns a FlagSet whose usage prints a summary line and
// every flag; parse errors are reported once and returned as errUsage.
func newFlagSet(a *app, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	fs.Usage = func() {
		fmt.Fprintf(a.stderr, "usage: node %s\n", strings.TrimSpace(name+" "+synopsis))
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintf(a.stderr, "\nflags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args into fs, mapping errors to errUsage / ErrHelp.
// Flags may follow positional arguments (node inspect DIR --verify).
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errUsage
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// parseNoArgs is parseFlags for a command that takes no positional
// arguments, and refuses one: the flag package stops at the first
// non-flag, so "--eval false" (a boolean flag takes its value as
// --eval=false) set --eval and left "false", which was dropped without
// a word.
func parseNoArgs(fs *flag.FlagSet, args []string) error {
	pos, err := parseFlags(fs, args)
	if err != nil || len(pos) == 0 {
		return err
	}
	hint := ""
	if pos[0] == "true" || pos[0] == "false" {
		hint = " (a boolean flag takes its value as --flag=" + pos[0] + ")"
	}
	fmt.Fprintf(fs.Output(), "node %s: unexpected argument %q%s\n", fs.Name(), pos[0], hint)
	fs.Usage()
	return errUsage
}

func newLogger(w io.Writer) *slog.Logger {
	level := slog.LevelInfo
	if v := strings.ToLower(os.Getenv("GRAPHNODE_LOG")); v == "debug" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}
