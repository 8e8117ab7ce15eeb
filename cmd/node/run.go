package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"

	"graphnode/node"
)

// configLogger is the logger of cfg's [log] on a's stderr, which also
// takes the standard library's log. It resolves cfg's format "auto"
// first, so that samplers, whose stderr is ours, log in the same format.
func configLogger(a *app, cfg *node.Config) *slog.Logger {
	cfg.Log.Format = resolveLogFormat(cfg.Log.Format, a.stderr)
	level, _ := node.ParseLevel(cfg.Log.Level)
	log := slog.New(newHandler(a.stderr, level, cfg.Log.Format))
	routeStdLog(log.Handler())
	return log
}

// runRun is `node run -c node.toml`: the daemon.
func runRun(ctx context.Context, a *app, args []string) error {
	// `node run 2>&1 | cat` stopped by Ctrl-C: cat is gone before the
	// node logs its drain. Died of SIGPIPE at that line, the node left
	// its rings and socket, and its samplers were killed (Pdeathsig)
	// mid-batch. Its log is lost from then on; the drain is not.
	surviveClosedOutput()
	fs := newFlagSet(a, "run", "-c node.toml")
	path := fs.String("c", "", "configuration `file` (node.toml.example documents every key)")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *path == "" {
		fmt.Fprintln(a.stderr, "node run: -c node.toml is required")
		fs.Usage()
		return errUsage
	}
	cfg, err := node.LoadConfig(*path)
	if err != nil {
		return badConfig(err)
	}
	log := configLogger(a, &cfg)
	info, _ := debug.ReadBuildInfo()
	log.Info("starting", "config", *path, "build", buildVersion(info, commit))
	sd := newNotifier(log)
	if cfg.Node.Fetch {
		// New would refuse it, after the fetch of a part file.
		if err := cfg.CheckSocketDir(); err != nil {
			return badConfig(fmt.Errorf("node: %w", err))
		}
		if _, err := node.Fetch(ctx, cfg, log, node.FetchOptions{Progress: func(line string) { sd.send("STATUS=" + line) }}); err != nil {
			if ctx.Err() != nil {
				// SIGTERM during the fetch is a stop, as it is once the
				// node serves (exit 0, not a failed unit); what was
				// fetched stays, and the next start goes on from it.
				sd.send("STOPPING=1")
				log.Info("stopped while fetching; the next start goes on from the bytes fetched", "err", err)
				return nil
			}
			if errors.Is(err, node.ErrConfig) {
				return badConfig(err) // a node.part the fetched graph.toml has not
			}
			return err // peers down or refusing: a later start may fetch
		}
	}
	// Whatever New refuses (the partition files, the certificates, the
	// kv checkpoints to load, rings.dir) fails every start the same way
	// until an operator changes it, but for what it says time may mend
	// (a certificate not valid yet on a clock behind): exit 1, restarted.
	n, err := node.New(cfg, log)
	if err != nil {
		if errors.Is(err, node.ErrTransient) {
			return err
		}
		return badConfig(err)
	}
	defer n.Close()
	a.onAbort(func() {
		removed, err := n.Abandon()
		log.Warn("second stop signal: exiting without draining; samplers end with the node, a kv save_on_exit is not written",
			"removed", removed, "err", err)
	})
	interval, err := watchdogInterval(os.Getenv("WATCHDOG_USEC"), os.Getenv("WATCHDOG_PID"), os.Getpid())
	if err != nil {
		return fmt.Errorf("node run: systemd watchdog: %w", err)
	}
	wctx, stopWatchdog := context.WithCancel(ctx)
	var watching sync.WaitGroup
	defer func() {
		stopWatchdog()
		watching.Wait()
	}()
	n.OnStatus = func(status string) { sd.send("STATUS=" + status) }
	n.OnReady = func() {
		sd.send("READY=1")
		if interval > 0 && sd.addr != "" {
			// systemd watches from READY=1 on.
			watching.Go(func() { watchdog(wctx, sd, interval, cfg.Control.Socket, n, log) })
		}
	}
	n.OnStopping = func() {
		stopWatchdog() // the stop is bounded by TimeoutStopSec instead
		sd.send("STOPPING=1")
	}
	err = n.Run(ctx)
	if errors.Is(err, node.ErrConfig) {
		// control.socket names what is no socket: found before serving.
		// Another node serving there, a mesh port in use, are not
		// the configuration's: a later start may succeed.
		return badConfig(err)
	}
	return err
}

// exitConfig is the exit status of a node run that cannot start with its
// configuration: EX_CONFIG of sysexits.h, as systemd.exec(5) lists it.
// The unit's RestartPreventExitStatus= names it: a node that fails so
// would fail the same way at each restart, every RestartSec, forever
// (a start limit of 5 in 10 s never trips at RestartSec=5s), and never
// show the unit failed. 1 stays for what a restart may mend.
const exitConfig = 78

// configError is an error of node run's configuration or of what it names
// (graph.toml and the part file, the certificates, rings.dir, the control
// socket's path), found before the node serves: exit status exitConfig.
type configError struct{ error }

func (e configError) Unwrap() error { return e.error }

// badConfig marks err as a configuration error; nil stays nil.
func badConfig(err error) error {
	if err == nil {
		return nil
	}
	return configError{err}
}

// resolveLogFormat turns "auto" into text on a terminal and JSON
// otherwise (under systemd the journal stores one JSON object a line).
func resolveLogFormat(format string, w io.Writer) string {
	if format != "auto" {
		return format
	}
	if isTerminal(w) && os.Getenv("JOURNAL_STREAM") == "" {
		return "text"
	}
	return "json"
}

// routeStdLog sends what libraries print with the standard log package
// (quic-go's warning that the kernel gave it smaller UDP buffers than it
// asked for) through h as warnings, so that they reach the journal in
// the node's format instead of as bare text lines.
func routeStdLog(h slog.Handler) {
	stdlog.SetFlags(0)
	stdlog.SetOutput(slog.NewLogLogger(h, slog.LevelWarn).Writer())
}

// newHandler is the slog handler of a node process (daemon or sampler).
func newHandler(w io.Writer, level slog.Level, format string) slog.Handler {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}

// notifier tells systemd (Type=notify, see deploy/systemd) the service's
// state: READY=1 once trainers can connect and every peer answered,
// STOPPING=1 when SIGTERM starts the drain, STATUS= lines for systemctl
// status. Outside systemd NOTIFY_SOCKET is unset and it sends nothing.
// A message that cannot be sent is logged (the first failure as an
// error: systemd waiting for READY=1 would otherwise time the start out
// without a word from us), and the node goes on serving.
type notifier struct {
	addr   string
	log    *slog.Logger
	mu     sync.Mutex
	failed bool
}

func newNotifier(log *slog.Logger) *notifier {
	return &notifier{addr: os.Getenv("NOTIFY_SOCKET"), log: log}
}

func (sd *notifier) send(state string) {
	if sd.addr == "" {
		return
	}
	sd.mu.Lock()
	defer sd.mu.Unlock()
	if err := sdNotify(sd.addr, state); err != nil {
		if !sd.failed {
			sd.log.Error("systemd notification failed: systemd will not see this node's state", "NOTIFY_SOCKET", sd.addr, "state", state, "err", err)
		} else {
			sd.log.Debug("systemd notification failed", "state", state, "err", err)
		}
		sd.failed = true
	}
}

// sdNotify sends one datagram of state to systemd's notification socket
// addr (a path, or an abstract name starting with '@').
func sdNotify(addr, state string) error {
	if addr[0] == '@' {
		addr = "\x00" + addr[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(state))
	return err
}
