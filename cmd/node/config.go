package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"graphnode/node"
)

// runConfig is `node config check -c node.toml`: it prints the effective
// configuration (defaults filled in) as TOML and fails listing every
// problem, each with its key; a warning does not fail it.
func runConfig(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, "config check", "-c node.toml")
	path := fs.String("c", "", "configuration `file` to check")
	switch {
	case len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help"):
		// check is the only subcommand: node help config shows its flags.
		fs.Usage()
		return flag.ErrHelp
	case len(args) == 0:
		fs.Usage()
		return errUsage
	case args[0] != "check":
		fmt.Fprintf(a.stderr, "node config: unknown subcommand %q (want check)\n", args[0])
		fs.Usage()
		return errUsage
	}
	if err := parseNoArgs(fs, args[1:]); err != nil {
		return err
	}
	if *path == "" {
		fmt.Fprintln(a.stderr, "node config check: -c node.toml is required")
		fs.Usage()
		return errUsage
	}
	// What the keys name on disk too, as node run reads it at start: a
	// certificate of another cluster, a key readable by others, a
	// graph.toml that does not parse passed the check and failed the run.
	cfg, warnings, err := node.CheckConfig(*path)
	if err != nil && !errors.Is(err, node.ErrConfig) {
		return err // not TOML at all: nothing to print
	}
	out, eerr := cfg.EncodeTOML()
	if eerr != nil {
		return eerr
	}
	a.stdout.Write(out)
	// What the service manager makes at start (the socket's directory
	// under /run): a check before the first start, or while the unit is
	// stopped, must pass.
	for _, w := range warnings {
		fmt.Fprintf(a.stderr, "node config: warning: %s\n", w)
	}
	if err != nil {
		lines := strings.Split(err.Error(), "\n")
		return fmt.Errorf("%d problem(s):\n  %s", len(lines), strings.Join(lines, "\n  "))
	}
	return nil
}
