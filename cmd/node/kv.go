package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"graphnode/node"
	"graphnode/node/client"
	"graphnode/node/control"
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
		"A step of a synchronous table in progress fails. A table that no node holds is an error.")
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
		if err != nil {
			errs = append(errs, fmt.Errorf("table %q: %w", name, err))
			continue
		}
		msg, err := dropMessage(info)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintln(a.stdout, msg)
	}
	return errors.Join(errs...)
}

// dropMessage says which nodes held and dropped the table of a kv_drop's
// answer; an error when none is known to have held it. The node asked
// may hold none where a peer held it (a table of a peer's
// [[kv.tables]]).
func dropMessage(info *control.DropInfo) (string, error) {
	older := ""
	if len(info.UnknownParts) > 0 {
		older = fmt.Sprintf(" (%s, of an older build, did not say whether it held it)", node.PartsText(info.UnknownParts))
	}
	if !info.Any() {
		return "", fmt.Errorf("table %q: no node holds such a table%s", info.Name, older)
	}
	var where []string
	if info.Dropped {
		where = append(where, "this node")
	}
	if len(info.DroppedParts) > 0 {
		where = append(where, node.PartsText(info.DroppedParts))
	}
	msg := fmt.Sprintf("dropped table %q on %s", info.Name, strings.Join(where, " and "))
	if !info.Dropped {
		msg += " (this node held none)"
	}
	return msg + older, nil
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
	fmt.Fprintf(a.stdout, "saved %d tables %q into %s\n", len(info.Tables), info.Tables, savedWhere(info.Dir, socket))
	return nil
}

// savedWhere says where a kv_save asked of the node at socket, which
// answered dir, put the checkpoint: each node's checkpoint_dir, dir on
// the node asked (the others' may be other directories: a kv_save
// answers the asked node's alone), or, from a client node, which holds
// no shard and answers "", each sampling node's.
func savedWhere(dir, socket string) string {
	if dir == "" {
		return "each sampling node's [kv] checkpoint_dir"
	}
	return fmt.Sprintf("each node's [kv] checkpoint_dir (%s on the node at %s)", dir, socket)
}
