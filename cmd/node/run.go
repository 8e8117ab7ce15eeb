package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"

	"golang.org/x/term"

	"graphnode/node"
)

// runRun is `node run -c node.toml`: the daemon.
func runRun(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, "run", "-c node.toml")
	path := fs.String("c", "", "configuration `file` (node.toml.example documents every key)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" {
		fmt.Fprintln(a.stderr, "node run: -c node.toml is required")
		fs.Usage()
		return errUsage
	}
	cfg, err := node.LoadConfig(*path)
	if err != nil {
		return err
	}
	// Resolve "auto" here, so the samplers, whose stderr is ours, log
	// in the same format.
	cfg.Log.Format = resolveLogFormat(cfg.Log.Format, a.stderr)
	level, _ := node.ParseLevel(cfg.Log.Level)
	log := slog.New(newHandler(a.stderr, level, cfg.Log.Format))
	n, err := node.New(cfg, log)
	if err != nil {
		return err
	}
	defer n.Close()
	n.OnReady = func() { sdNotify("READY=1") }
	return n.Run(ctx)
}

// resolveLogFormat turns "auto" into text on a terminal and JSON
// otherwise (under systemd the journal stores one JSON object a line).
func resolveLogFormat(format string, w io.Writer) string {
	if format != "auto" {
		return format
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) && os.Getenv("JOURNAL_STREAM") == "" {
		return "text"
	}
	return "json"
}

// newHandler is the slog handler of a node process (daemon or sampler).
func newHandler(w io.Writer, level slog.Level, format string) slog.Handler {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}

// sdNotify tells systemd (Type=notify) the service's state. Outside
// systemd NOTIFY_SOCKET is unset and it does nothing.
func sdNotify(state string) {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return
	}
	if addr[0] == '@' {
		addr = "\x00" + addr[1:] // abstract socket
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return
	}
	defer c.Close()
	c.Write([]byte(state))
}
