package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"graphnode/mesh"
)

const certSynopsis = "init|add [flags]"

// maxCertDays caps --days at a hundred years (X.509 itself allows to
// 9999; a Duration, about 292 years).
const maxCertDays = 36500

// runCert is `node cert init` (write a cluster CA and one certificate per
// node for the mesh's mutual TLS) and `node cert add` (one more node,
// signed by that CA).
func runCert(_ context.Context, a *app, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "init":
			return certInit(a, args[1:])
		case "add":
			return certAdd(a, args[1:])
		}
	}
	if len(args) > 0 && !isHelp(args[0]) {
		fmt.Fprintf(a.stderr, "node cert: unknown subcommand %q (want init or add)\n", args[0])
	}
	fmt.Fprintf(a.stderr, "usage: node cert %s\n\n"+
		"subcommands:\n"+
		"  init  create a cluster CA and a certificate per node\n"+
		"  add   sign a certificate for one more node with the CA of a directory init wrote\n\n"+
		"Run 'node cert init --help' or 'node cert add --help' for the flags.\n", certSynopsis)
	if len(args) == 0 || !isHelp(args[0]) {
		return errUsage
	}
	return flag.ErrHelp
}

// certInit is `node cert init`.
func certInit(a *app, args []string) error {
	var (
		cluster, nodes, out string
		force               bool
		days                int
	)
	fs := newFlagSet(a, "cert init", "--cluster NAME --nodes host0,host1,... -o DIR [--force] [--days N]\n\n"+
		"Writes DIR/ca.crt and DIR/ca.key (the cluster CA, ECDSA P-256) and, per node,\n"+
		"DIR/NODE.crt and DIR/NODE.key (CN and DNS name NODE, plus 127.0.0.1 and ::1;\n"+
		"client and server authentication). Every file has mode 0600.\n"+
		"Copy ca.crt, NODE.crt and NODE.key to each host; keep ca.key off the nodes.\n"+
		"A node reads them at its start: new files take effect when it restarts.")
	fs.StringVar(&cluster, "cluster", "", "cluster name, recorded in the CA (required; peers of another cluster are refused)")
	fs.StringVar(&nodes, "nodes", "", "comma-separated node names, as peers address each other (required)")
	fs.StringVar(&out, "o", "", "output directory, created with mode 0700 (required)")
	fs.BoolVar(&force, "force", false, "overwrite an existing CA (every node must then get its new certificate and be restarted)")
	fs.IntVar(&days, "days", int(mesh.DefaultCertValidity/(24*time.Hour)), "validity of the certificates in days")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := checkCertFlags(a, fs, "init", pos, days, flagValue{"--cluster", cluster}, flagValue{"--nodes", nodes}, flagValue{"-o", out}); err != nil {
		return err
	}
	var names []string
	for n := range strings.SplitSeq(nodes, ",") {
		names = append(names, strings.TrimSpace(n))
	}
	var bad []string
	if err := mesh.CheckName("cluster", cluster); err != nil {
		bad = append(bad, fmt.Sprintf("--cluster %q: %v", cluster, err))
	}
	for _, err := range mesh.CheckNodes(names) {
		bad = append(bad, fmt.Sprintf("--nodes %q: %v", nodes, err))
	}
	if st, err := os.Stat(out); err == nil && !st.IsDir() {
		// WriteCluster said "ca.key exists: a new CA would lock out
		// every node holding the old one".
		bad = append(bad, fmt.Sprintf("-o %q is a file, not a directory", out))
	}
	if len(bad) > 0 {
		return certUsage(a, "init", bad...)
	}
	spec := mesh.ClusterSpec{Cluster: cluster, Nodes: names, Validity: time.Duration(days) * 24 * time.Hour, Force: force}
	if err := mesh.WriteCluster(out, spec); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "wrote CA of cluster %q and %d node certificates to %s (valid %d days)\n", cluster, len(names), out, days)
	return nil
}

// certAdd is `node cert add`.
func certAdd(a *app, args []string) error {
	var (
		dir, name string
		force     bool
		days      int
	)
	fs := newFlagSet(a, "cert add", "--certs DIR --node NAME [--force] [--days N]\n\n"+
		"Signs a certificate for one more node (a new host, or the host of a client\n"+
		"node) with the cluster CA in DIR (ca.crt and ca.key, as node cert init wrote\n"+
		"them) and writes DIR/NAME.crt and DIR/NAME.key (mode 0600) as init does; the\n"+
		"other nodes keep theirs. The certificate ends with the CA at the latest.\n"+
		"Copy ca.crt, NAME.crt and NAME.key to the host. A node reads them at its\n"+
		"start: a renewed certificate (--force) takes effect when it restarts.")
	fs.StringVar(&dir, "certs", "", "the directory node cert init wrote, with ca.crt and ca.key (required)")
	fs.StringVar(&name, "node", "", "the new node's name, as peers address it (required)")
	fs.BoolVar(&force, "force", false, "overwrite NAME's existing certificate and key, which its node takes up when it restarts (the old certificate stays valid until it expires: there is no revocation)")
	fs.IntVar(&days, "days", int(mesh.DefaultCertValidity/(24*time.Hour)), "validity of the certificate in days (never past the CA's)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := checkCertFlags(a, fs, "add", pos, days, flagValue{"--certs", dir}, flagValue{"--node", name}); err != nil {
		return err
	}
	if err := mesh.CheckNodeName(name); err != nil {
		return certUsage(a, "add", fmt.Sprintf("--node %q: %v", name, err))
	}
	cert, err := mesh.AddNode(dir, mesh.NodeSpec{Node: name, Validity: time.Duration(days) * 24 * time.Hour, Force: force})
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "wrote the certificate of node %q of cluster %q to %s (valid until %s)\n",
		name, cert.Subject.Organization[0], dir, cert.NotAfter.UTC().Format(time.DateOnly))
	return nil
}

// flagValue is a required flag of node cert and what it was given.
type flagValue struct{ name, v string }

// checkCertFlags refuses what node cert sub (init, add) cannot take:
// positional arguments and missing required flags (with the usage), and
// a validity of days out of range.
func checkCertFlags(a *app, fs *flag.FlagSet, sub string, pos []string, days int, required ...flagValue) error {
	var missing []string
	for _, f := range required {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	switch {
	case len(pos) > 0:
		fmt.Fprintf(a.stderr, "node cert %s: unexpected argument %q\n", sub, pos[0])
		fs.Usage()
		return errUsage
	case len(missing) > 0:
		fmt.Fprintf(a.stderr, "node cert %s: missing %s\n", sub, strings.Join(missing, ", "))
		fs.Usage()
		return errUsage
	case days <= 0 || days > maxCertDays:
		// Beyond 292 years a Duration overflows, and the validity with it.
		return certUsage(a, sub, fmt.Sprintf("--days %d: want 1 to %d days", days, maxCertDays))
	}
	return nil
}

// certUsage reports bad flag values of node cert sub, one a line, as a
// usage error (exit 2, as node train, kge and fetch do).
func certUsage(a *app, sub string, problems ...string) error {
	for _, p := range problems {
		fmt.Fprintf(a.stderr, "node cert %s: %s\n", sub, p)
	}
	return errUsage
}
