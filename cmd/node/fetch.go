package main

import (
	"context"
	"fmt"
	"strings"

	"graphnode/node"
)

// runFetch is `node fetch -c node.toml`: what `node run` does first with
// node.fetch = true, alone (to provision a host before its node starts,
// or to fetch every file of the set with --all).
func runFetch(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, "fetch", "-c node.toml [--all] [--wait 2m]")
	path := fs.String("c", "", "configuration `file` of this host's node (node.parts, node.part, [mesh])")
	all := fs.Bool("all", false, "fetch every file graph.toml lists, not only graph.toml and this node's part")
	wait := fs.Duration("wait", node.DefaultFetchWait, "how long to keep asking peers that do not answer")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *path == "" {
		fmt.Fprintln(a.stderr, "node fetch: -c node.toml is required")
		fs.Usage()
		return errUsage
	}
	if *wait <= 0 {
		fmt.Fprintf(a.stderr, "node fetch: --wait %v: want a positive duration\n", *wait)
		return errUsage
	}
	cfg, err := node.LoadFetchConfig(*path)
	if err != nil {
		return err
	}
	tty := isTerminal(a.stderr)
	opts := node.FetchOptions{All: *all, Wait: *wait}
	if tty {
		opts.Progress = func(line string) { fmt.Fprintf(a.stderr, "\r\033[K%s", line) }
	}
	// The file's [log], as node run logs: a fetch under a unit or a
	// script goes to the same journal in the same format.
	files, err := node.Fetch(ctx, cfg, configLogger(a, &cfg), opts)
	if tty {
		fmt.Fprint(a.stderr, "\r\033[K")
	}
	for _, f := range files {
		fmt.Fprintln(a.stdout, fetchedLine(f))
	}
	return err
}

// fetchedLine says what node fetch did about one file.
func fetchedLine(f node.FetchedFile) string {
	if f.Fetched == 0 && len(f.From) == 0 {
		return f.Path + ": present"
	}
	s := fmt.Sprintf("%s: fetched %d bytes from %s in %.2f s", f.Path, f.Fetched, strings.Join(f.From, ", "), f.Elapsed.Seconds())
	if f.Fetched >= 1e6 {
		s += fmt.Sprintf(" (%.0f MB/s)", float64(f.Fetched)/1e6/max(f.Elapsed.Seconds(), 1e-6))
	}
	if f.Resumed > 0 {
		s += fmt.Sprintf(", going on from %d bytes fetched before", f.Resumed)
	}
	return s
}
