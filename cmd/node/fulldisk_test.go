package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// onFullDisk runs script with sh inside a new user and mount namespace in
// which a tmpfs of size bytes is mounted at $1 (mnt). The mount exists
// only in there, so script also looks at what is left on it. $2 is the
// node binary. It returns the combined output; the test skips where the
// kernel does not allow an unprivileged mount namespace.
func onFullDisk(t *testing.T, mnt string, size int64, script string) string {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare(1) (util-linux) for a small tmpfs")
	}
	probe := exec.Command("unshare", "-rm", "sh", "-c", `mount -t tmpfs -o size=4k none "$1"`, "sh", mnt)
	if out, err := probe.CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs in a user namespace here (%v: %s)", err, bytes.TrimSpace(out))
	}
	cmd := exec.Command("unshare", "-rm", "sh", "-c",
		`mount -t tmpfs -o size=`+strconv.FormatInt(size, 10)+` none "$1" || exit 99
`+script, "sh", mnt, nodeBinary(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return string(out)
}

// dirBytes is the total size of the regular files under dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	_, n, err := treeSize(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFullDisk fills the disk under `node partition` and `node gen
// --force`: each fails with an error naming the file it was writing and
// the disk being full, leaves no temporary file behind, and loses
// nothing that was there before (gen --force keeps the dataset it was to
// replace, byte for byte).
func TestFullDisk(t *testing.T) {
	work := t.TempDir()
	g := filepath.Join(work, "g")
	gen := []string{"gen", "rmat", "--nodes", "3000", "--edges", "30000", "--feat-dim", "8", "--seed", "3"}
	if code, _, stderr := runNode(t, append(gen, "-o", g)...); code != 0 {
		t.Fatalf("gen: %s", stderr)
	}
	mnt := filepath.Join(work, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}

	t.Run("partition", func(t *testing.T) {
		// The parts of this graph take about as much as its text; a
		// tenth of that does not hold them.
		out := onFullDisk(t, mnt, 64<<10, `"$2" partition --input `+g+` --parts 2 --method metis -o "$1/parts"
echo "exit $?"
echo "left: [$(ls -A "$1")]"`)
		// The error names the file as it would have been, once: not
		// the temporary directory and file it was written in.
		for _, want := range []string{"node partition: ", "csr: write " + mnt + "/parts/part-", "/part.csr: ", ": no space left on device", "exit 1\n", "left: []\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, ".tmp") {
			t.Errorf("output names a temporary path:\n%s", out)
		}
	})

	t.Run("partition --force", func(t *testing.T) {
		// Room for the partitioning and a half: replacing it with another
		// needs both at once, so the forced run fails and the first stays
		// whole (inspect --verify checks every section's checksum).
		ref := filepath.Join(work, "ref")
		if code, _, stderr := runNode(t, "partition", "--input", g, "--parts", "2", "-o", ref); code != 0 {
			t.Fatalf("partition: %s", stderr)
		}
		out := onFullDisk(t, mnt, dirBytes(t, ref)*3/2, `"$2" partition --input `+g+` --parts 2 -o "$1/parts" >/dev/null 2>&1 || { echo "first partition failed"; exit 1; }
"$2" partition --input `+g+` --parts 4 --method metis --force -o "$1/parts"
echo "exit $?"
"$2" inspect "$1/parts" --verify >"$1/inspect" 2>&1 && echo "verified: $(head -1 "$1/inspect" | grep -o '[0-9]* parts')"
echo "left: [$(ls -A "$1")]"`)
		for _, want := range []string{"node partition: ", "no space left on device (--force keeps the partitioning in " + mnt + "/parts until the new one is complete", "exit 1\n", "verified: 2 parts\n", "left: [inspect\nparts]\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("gen --force", func(t *testing.T) {
		// Room for one and a half copies of the dataset: the first gen
		// fits; the forced second, three times as large, would not fit
		// even in place of the first.
		size := dirBytes(t, g) * 3 / 2
		args := strings.Join(gen, " ")
		out := onFullDisk(t, mnt, size, `"$2" `+args+` -o "$1/g" >/dev/null 2>&1 || { echo "first gen failed"; exit 1; }
before=$(cd "$1/g" && find . -type f | sort | xargs cksum)
"$2" `+strings.NewReplacer("--edges 30000", "--edges 90000", "--feat-dim 8", "--feat-dim 24").Replace(args)+` --force -o "$1/g"
echo "exit $?"
after=$(cd "$1/g" && find . -type f | sort | xargs cksum)
[ "$before" = "$after" ] && echo "dataset unchanged" || printf 'dataset changed:\n%s\n---\n%s\n' "$before" "$after"
echo "left: [$(ls -A "$1/g")]"`)
		for _, want := range []string{"node gen: ", "no space left on device (--force keeps the old raw/ and split/", "exit 1\n", "dataset unchanged\n", "left: [raw\nsplit]\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		// As with partition: the file as it would have been, once, not
		// the temporary directory it was written in (removed by then).
		if !strings.Contains(out, "partition: write ogb "+mnt+"/g/raw/") || strings.Contains(out, ".tmp") {
			t.Errorf("the error does not name the file, or names a temporary path:\n%s", out)
		}
	})
}

// TestPartitionOntoMountPoint: -o naming a file system mounted for the
// partitions is written into, nothing beside it; it failed after the
// whole partitioning (rename: device or resource busy), having written
// the files on the parent's disk. --force cannot replace a mount point
// whole and is refused before the input is read.
func TestPartitionOntoMountPoint(t *testing.T) {
	work := t.TempDir()
	in := writeEdgeList(t, 200)
	mnt := filepath.Join(work, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	out := onFullDisk(t, mnt, 8<<20, `"$2" partition --input `+in+` --parts 2 -o "$1"
echo "exit $?"
"$2" inspect --verify "$1" >/dev/null 2>&1 && echo verified
echo "beside: [$(ls -A "$1/..")]"
echo "in: [$(ls -A "$1" | tr '\n' ' ')]"
"$2" partition --input `+in+` --parts 3 --force -o "$1"
echo "force exit $?"
"$2" inspect "$1" | head -1 | grep -o '[0-9]* parts'`)
	for _, want := range []string{"exit 0\n", "verified\n", "beside: [mnt]\n", "in: [graph.toml orig_ids.bin part-0 part-1 ]\n",
		"node partition: partition: output " + mnt + " is a mount point, which --force cannot move aside", "force exit 1\n", "2 parts\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "\nread ") != 1 {
		t.Errorf("the --force run read its input before refusing the output:\n%s", out)
	}
}
