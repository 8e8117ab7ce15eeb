package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"graphnode/node/client"
)

const kvSynopsis = "drop|save [flags]"

// runKV is `node kv drop` and `node kv save`: what a trainer asks of the
// parameter server through its connection (kv_drop, kv_save), for an
// operator: a table whose rows or width a new job changes (node train
// and node kge refuse it until it is dropped), a checkpoint on demand.
func runKV(ctx context.Context, a *app, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "drop":
			return kvDrop(ctx, a, args[1:])
		case "save":
			return kvSave(ctx, a, args[1:])
		}
	}
	if len(args) > 0 && !isHelp(args[0]) {
		fmt.Fprintf(a.stderr, "node kv: unknown subcommand %q (want drop or save)\n", args[0])
	}
	fmt.Fprintf(a.stderr, "usage: node kv %s\n\n"+
		"subcommands:\n"+
		"  drop  remove tables from every node of the cluster (kv_drop)\n"+
		"  save  checkpoint every table on every node into its [kv] checkpoint_dir (kv_save)\n\n"+
		"Run 'node kv drop --help' or 'node kv save --help' for the flags.\n", kvSynopsis)
	if len(args) == 0 || !isHelp(args[0]) {
		return errUsage
	}
	return flag.ErrHelp
}

// isHelp reports whether arg asks a command with subcommands for its usage.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

// kvFlags parses a kv subcommand's flags (--socket, required); it
// returns the socket and the positional arguments.
func kvFlags(a *app, fs *flag.FlagSet, args []string) (string, []string, error) {
	socket := fs.String("socket", "", "control socket of this host's node run (required)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return "", nil, err
	}
	if *socket == "" {
		fmt.Fprintf(a.stderr, "node %s: --socket is required\n", fs.Name())
		fs.Usage()
		return "", nil, errUsage
	}
	return *socket, pos, nil
}

// kvDrop is `node kv drop --socket PATH NAME...`.
func kvDrop(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, "kv drop", "--socket PATH NAME...\n\n"+
		"Removes each table from every node of the cluster; its checkpoint files stay on disk.\n"+
		"A step of a synchronous table in progress fails. A table this node does not hold is an error.")
	socket, names, err := kvFlags(a, fs, args)
	if err != nil {
		return err
	}
	// The arguments are checked before the node is reached: a dead
	// socket reported the dial, and hid them.
	if len(names) == 0 {
		fmt.Fprintln(a.stderr, "node kv drop: name the tables to drop")
		fs.Usage()
		return errUsage
	}
	for _, name := range names {
		if !validTableName(name) { // no table has such a name
			fmt.Fprintf(a.stderr, "node kv drop: table %q: %s\n", name, tableNameRule())
			return errUsage
		}
	}
	k, err := client.DialKV(ctx, socket)
	if err != nil {
		return err
	}
	defer k.Close()
	var errs []error
	for _, name := range names {
		info, err := k.Drop(ctx, name)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("table %q: %w", name, err))
		case !info.Dropped:
			errs = append(errs, fmt.Errorf("table %q: this node holds no such table", name))
		default:
			fmt.Fprintf(a.stdout, "dropped table %q\n", name)
		}
	}
	return errors.Join(errs...)
}

// kvSave is `node kv save --socket PATH`.
func kvSave(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, "kv save", "--socket PATH\n\n"+
		"Checkpoints every table on every node into the node's [kv] checkpoint_dir, as one save\n"+
		"(a crash in the middle leaves the previous checkpoint).")
	socket, pos, err := kvFlags(a, fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		fmt.Fprintf(a.stderr, "node kv save: unexpected argument %q\n", pos[0])
		fs.Usage()
		return errUsage
	}
	k, err := client.DialKV(ctx, socket)
	if err != nil {
		return err
	}
	defer k.Close()
	info, err := k.Save(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "saved %d tables %q into %s on every node\n", len(info.Tables), info.Tables, info.Dir)
	return nil
}
