package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"graphnode/node"
	"graphnode/node/client"
	"graphnode/node/control"
)

const kvSynopsis = "list|drop|save [flags]"

// runKV is `node kv list`, `node kv drop` and `node kv save`: what the
// node's parameter server holds, and what a trainer asks of it through
// its connection (kv_drop, kv_save), for an operator: a table whose rows
// or width a new job changes (node train and node kge refuse it until it
// is dropped), a checkpoint on demand.
func runKV(ctx context.Context, a *app, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "list":
			return kvList(ctx, a, args[1:])
		case "drop":
			return kvDrop(ctx, a, args[1:])
		case "save":
			return kvSave(ctx, a, args[1:])
		}
	}
	if len(args) > 0 && !isHelp(args[0]) {
		fmt.Fprintf(a.stderr, "node kv: unknown subcommand %q (want list, drop or save)\n", args[0])
	}
	fmt.Fprintf(a.stderr, "usage: node kv %s\n\n"+
		"subcommands:\n"+
		"  list  the tables of this host's node: size, mode, optimiser, its shard, updates, checkpoint\n"+
		"  drop  remove tables from every node of the cluster (kv_drop)\n"+
		"  save  checkpoint every table on every node into its [kv] checkpoint_dir (kv_save)\n\n"+
		"Run 'node kv list --help', 'node kv drop --help' or 'node kv save --help' for the flags.\n", kvSynopsis)
	if len(args) == 0 || !isHelp(args[0]) {
		return errUsage
	}
	return flag.ErrHelp
}

// isHelp reports whether arg asks a command with subcommands for its usage.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

// kvList is `node kv list --socket PATH [--json]`.
func kvList(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, "kv list", "--socket PATH [--json]\n\n"+
		"Lists the tables of the node at PATH and its shard of each: rows, width, mode, optimiser,\n"+
		"the rows of its shard, the updates applied to it (pushes, or steps of a synchronous table),\n"+
		"and the checkpoint its rows were last loaded from or saved to. Every node of a cluster\n"+
		"holds a shard of every table; each node's updates and checkpoint are its own.")
	jsonOut := fs.Bool("json", false, "print the node's kv stats as JSON")
	socket, err := kvFlagsOnly(a, fs, args)
	if err != nil {
		return err
	}
	st, err := client.Stats(ctx, socket)
	if err != nil {
		return err
	}
	if st.KV == nil {
		return fmt.Errorf("the node at %s holds no kv shard (a client node, or of a build before kv stats): ask a sampling node", socket)
	}
	if *jsonOut {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st.KV)
	}
	fmt.Fprint(a.stdout, kvListText(st, socket))
	return nil
}

// kvListText is node kv list's report of the node at socket.
func kvListText(st *control.Stats, socket string) string {
	var b strings.Builder
	dir := st.KV.CheckpointDir
	if dir == "" {
		dir = "not set"
	}
	fmt.Fprintf(&b, "tables of the node at %s (part %d; [kv] checkpoint_dir %s): %d\n", socket, st.Part, dir, len(st.KV.Tables))
	if len(st.KV.Tables) == 0 {
		return b.String()
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "table\trows\tdim\tmode\toptimizer\tshard rows\tupdates\tshard's rows are")
	for _, t := range st.KV.Tables {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t[%d, %d)\t%d\t%s\n", t.Name, t.Rows, t.Dim, t.Mode, t.Optimizer, t.ShardLo, t.ShardHi, t.Version, rowsState(t))
	}
	tw.Flush()
	return b.String()
}

// rowsState says where a shard's rows come from: its initial rows or a
// checkpoint, and whether updates changed them since.
func rowsState(t control.KVTableStats) string {
	var from string
	switch {
	case t.Checkpoint == "" && t.Changed:
		return "updated, never saved"
	case t.Checkpoint == "":
		return "initial"
	case t.Loaded:
		from = "loaded from " + t.Checkpoint
	default:
		from = "saved to " + t.Checkpoint
	}
	if t.Changed {
		return "updated since " + from
	}
	return "as " + from
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

// kvFlagsOnly is kvFlags of a subcommand that takes no argument.
func kvFlagsOnly(a *app, fs *flag.FlagSet, args []string) (string, error) {
	socket, pos, err := kvFlags(a, fs, args)
	if err != nil {
		return "", err
	}
	if len(pos) > 0 {
		fmt.Fprintf(a.stderr, "node %s: unexpected argument %q\n", fs.Name(), pos[0])
		fs.Usage()
		return "", errUsage
	}
	return socket, nil
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
	socket, err := kvFlagsOnly(a, fs, args)
	if err != nil {
		return err
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
