package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"graphnode/csr"
	"graphnode/kv"
	"graphnode/mesh"
	"graphnode/node"
	"graphnode/partition"
	"graphnode/sample"
	"graphnode/shm"
)

// TestVersion: `node version` and `node --version` print the build line
// and every format's version as the packages define it; an argument is
// a usage error.
func TestVersion(t *testing.T) {
	code, out, errs := cliRun("version")
	if code != 0 || errs != "" {
		t.Fatalf("node version: exit %d, stderr %q", code, errs)
	}
	if !strings.HasPrefix(out, "node (graphnode) ") {
		t.Errorf("first line: %q", strings.SplitN(out, "\n", 2)[0])
	}
	for _, want := range []string{
		fmt.Sprintf("node.toml         version = %d\n", node.ConfigVersion),
		fmt.Sprintf("parts/graph.toml  version = %d\n", partition.ManifestVersion),
		fmt.Sprintf("part.csr          %d.%d\n", csr.MajorVersion, csr.MinorVersion),
		fmt.Sprintf("ring files        %d.%d\n", shm.MajorVersion, shm.MinorVersion),
		fmt.Sprintf("batch records     %d.%d\n", sample.MajorVersion, sample.MinorVersion),
		fmt.Sprintf("kv checkpoints    %d.%d\n", kv.CheckpointMajor, kv.CheckpointMinor),
		"mesh (ALPN)       " + mesh.ALPN + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no line %q in:\n%s", want, out)
		}
	}
	if code, out2, _ := cliRun("--version"); code != 0 || out2 != out {
		t.Errorf("node --version: exit %d, output\n%s\nwant that of node version", code, out2)
	}
	if code, _, errs := cliRun("version", "extra"); code != 2 || !strings.Contains(errs, `unexpected argument "extra"`) {
		t.Errorf("node version extra: exit %d, stderr %q", code, errs)
	}
}

func TestBuildVersion(t *testing.T) {
	vcs := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-11-23T05:00:00Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	for _, tc := range []struct {
		info   *debug.BuildInfo
		linked string
		want   string
	}{
		{vcs, "ffff", "(devel), commit 0123abcd+modified (2026-11-23T05:00:00Z)"},
		{&debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}}, "5725737b4cc3", "v1.2.0, commit 5725737b4cc3"},
		{nil, "", "(devel), no commit recorded (built outside a git checkout, or not by make build)"},
	} {
		if got := buildVersion(tc.info, tc.linked); got != tc.want {
			t.Errorf("buildVersion(%v, %q) = %q, want %q", tc.info, tc.linked, got, tc.want)
		}
	}
}

// TestMakeBuildStampsCommit: the Makefile links the commit into the
// variable `node version` prints.
func TestMakeBuildStampsCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	const flag = `-ldflags "-X main.commit=$(COMMIT)"`
	if !strings.Contains(string(mk), flag) {
		t.Fatalf("the Makefile's build does not pass %s", flag)
	}
	bin := filepath.Join(t.TempDir(), "node")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-X main.commit=feedbeef0123+modified", "-o", bin, "graphnode/cmd/node")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if first := strings.SplitN(string(out), "\n", 2)[0]; first != "node (graphnode) (devel), commit feedbeef0123+modified" {
		t.Errorf("first line %q", first)
	}
}

// TestUsageWithoutFlags: a command with no flags prints its usage line
// without an empty flags section.
func TestUsageWithoutFlags(t *testing.T) {
	_, _, errs := cliRun("version", "--help")
	if strings.TrimSpace(errs) != "usage: node version" {
		t.Errorf("node version --help printed %q, want the usage line alone", errs)
	}
	if _, _, errs := cliRun("fetch", "--help"); !strings.Contains(errs, "\nflags:\n  -all") {
		t.Errorf("node fetch --help lost its flags:\n%s", errs)
	}
}
