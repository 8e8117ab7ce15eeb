package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"graphnode/csr"
	"graphnode/kv"
	"graphnode/mesh"
	"graphnode/node"
	"graphnode/partition"
	"graphnode/sample"
	"graphnode/shm"
)

// commit is the commit the Makefile built from (-ldflags "-X
// main.commit=..."), used when the build recorded no VCS information (the
// Makefile builds with -trimpath; GOFLAGS may hold -buildvcs=false). It
// is set at link time and never written.
var commit string

// runVersion is `node version` (also `node --version`): the build, and
// the version of every file format and protocol this build reads and
// writes, so that an operator can tell whether the binaries of two hosts
// and a parts/ directory fit together.
func runVersion(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, "version", "")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		fmt.Fprintf(a.stderr, "node version: unexpected argument %q\n", pos[0])
		fs.Usage()
		return errUsage
	}
	info, _ := debug.ReadBuildInfo()
	writeVersion(a.stdout, info, commit)
	return nil
}

// writeVersion prints the build described by info (nil: unknown) and
// linked (the Makefile's commit), and the formats of this build.
func writeVersion(w io.Writer, info *debug.BuildInfo, linked string) {
	fmt.Fprintf(w, "node (graphnode) %s\n", buildVersion(info, linked))
	cgo := "CGO_ENABLED not recorded"
	if info != nil {
		for _, s := range info.Settings {
			switch {
			case s.Key != "CGO_ENABLED":
			case s.Value == "0":
				cgo = "static, CGO_ENABLED=0"
			default:
				cgo = "CGO_ENABLED=" + s.Value
			}
		}
	}
	fmt.Fprintf(w, "built with %s for %s/%s (%s)\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, cgo)
	fmt.Fprintf(w, "formats and protocols (a reader refuses another major version):\n")
	for _, f := range []struct{ what, version string }{
		{"node.toml", fmt.Sprintf("version = %d", node.ConfigVersion)},
		{"parts/graph.toml", fmt.Sprintf("version = %d", partition.ManifestVersion)},
		{"part.csr", fmt.Sprintf("%d.%d", csr.MajorVersion, csr.MinorVersion)},
		{"ring files", fmt.Sprintf("%d.%d", shm.MajorVersion, shm.MinorVersion)},
		{"batch records", fmt.Sprintf("%d.%d", sample.MajorVersion, sample.MinorVersion)},
		{"kv checkpoints", fmt.Sprintf("%d.%d", kv.CheckpointMajor, kv.CheckpointMinor)},
		{"mesh (ALPN)", mesh.ALPN},
	} {
		fmt.Fprintf(w, "  %-17s %s\n", f.what, f.version)
	}
}

// buildVersion is the module version and the commit the binary was built
// from (with "+modified" when the tree had uncommitted changes): the one
// go build recorded, else linked; or it says that none was recorded.
func buildVersion(info *debug.BuildInfo, linked string) string {
	if info == nil {
		info = &debug.BuildInfo{}
	}
	var rev, when string
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	switch {
	case rev != "":
		if modified {
			rev += "+modified"
		}
		return fmt.Sprintf("%s, commit %s (%s)", v, rev, when)
	case linked != "":
		return fmt.Sprintf("%s, commit %s", v, linked)
	}
	return v + ", no commit recorded (built outside a git checkout, or not by make build)"
}
