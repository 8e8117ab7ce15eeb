package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"graphnode/partition"
)

// TestPartitionKeepsWhatAppears: a file that appears in the output while
// the input is read or partitioned fails the run at its end, naming it
// and the temporary directory that holds the finished partitioning. The
// run refused the output as "exists and is not empty" once partitioned,
// before writing anything: the partitioning was thrown away and no
// directory named. With --force, what the output held as the run began
// is replaced, and what appeared in it since with it; an output that was
// absent then is as without --force.
func TestPartitionKeepsWhatAppears(t *testing.T) {
	in := writeEdgeList(t, 12)
	const (
		plain = "and without --force nothing there is replaced or removed; the finished output is left whole in "
		force = "and --force replaces only what the output held when the run began; the finished output is left whole in "
	)
	for _, tt := range []struct {
		name  string
		old   bool // the output holds an earlier partitioning as the run begins
		force bool
		want  string // stderr after "node partition: partition: output OUT: "; "" the run succeeds
	}{
		{"new", false, false, plain},
		{"force/new", false, true, force},
		{"force/old", true, true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "parts")
			args := []string{"partition", "--input", in, "--format", "edgelist", "--parts", "2", "--method", "metis", "-o", out}
			if tt.force {
				args = append(args, "--force")
			}
			if tt.old {
				if code, stdout, stderr := runNode(t, append(args[:len(args):len(args)], "--seed", "2")...); code != 0 {
					t.Fatalf("the earlier run: code %d\n%s\n%s", code, stdout, stderr)
				}
			}
			var stdout, stderr bytes.Buffer
			a := newApp(&stdout, &stderr)
			// The machine's memory is asked once the input is read,
			// after the output was checked: the file appears then.
			a.memory = func() uint64 {
				if err := os.MkdirAll(out, 0o755); err != nil {
					t.Error(err)
				}
				if err := os.WriteFile(filepath.Join(out, "notes.txt"), []byte("mine\n"), 0o644); err != nil {
					t.Error(err)
				}
				return 0
			}
			code := a.run(context.Background(), args)
			if tt.want == "" {
				if code != 0 {
					t.Fatalf("code %d\n%s\n%s", code, stdout.String(), stderr.String())
				}
				m, err := partition.OpenDir(out)
				if err != nil || m.Seed != 1 || m.Parts != 2 {
					t.Fatalf("the output after --force: %+v, %v", m, err)
				}
				if _, err := os.Stat(filepath.Join(out, "notes.txt")); !os.IsNotExist(err) {
					t.Errorf("notes.txt, in the output --force replaced, survived: %v", err)
				}
				return
			}
			want := "node partition: partition: output " + out + ": notes.txt appeared in it during the run, " + tt.want + out + "/.tmp-"
			if code != 1 || !strings.Contains(stderr.String(), want) {
				t.Fatalf("code %d, stderr:\n%s\nwant code 1 and %q", code, stderr.String(), want)
			}
			if strings.Contains(stdout.String(), "wrote ") {
				t.Errorf("stdout says wrote:\n%s", stdout.String())
			}
			if b, err := os.ReadFile(filepath.Join(out, "notes.txt")); err != nil || string(b) != "mine\n" {
				t.Errorf("notes.txt: %q, %v", b, err)
			}
			_, kept, _ := strings.Cut(stderr.String(), "left whole in ")
			kept, _, _ = strings.Cut(kept, " (")
			m, err := partition.OpenDir(kept)
			if err != nil || m.Nodes != 12 || m.Parts != 2 || m.Method != partition.MethodMetis {
				t.Fatalf("the finished partitioning in %s: %+v, %v", kept, m, err)
			}
		})
	}
}

// TestPartitionKGCutName: node partition and node inspect name a
// knowledge graph's cut for the entity a triple is not stored with. With
// --direction in a triple is stored with its tail, and both said "tail
// owned elsewhere".
func TestPartitionKGCutName(t *testing.T) {
	in := t.TempDir()
	for name, text := range map[string]string{
		"entities.dict":  "0\ta\n1\tb\n2\tc\n3\td\n",
		"relations.dict": "0\tr\n",
		"train.txt":      "a\tr\tb\nb\tr\tc\nc\tr\td\nd\tr\ta\na\tr\tc\n",
		"valid.txt":      "b\tr\td\n",
		"test.txt":       "c\tr\ta\n",
	} {
		if err := os.WriteFile(filepath.Join(in, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		direction []string
		want      string
	}{
		{nil, "triple cut (tail owned elsewhere)"}, // out, as DGL-KE stores a triple with its head
		{[]string{"--direction", "out"}, "triple cut (tail owned elsewhere)"},
		{[]string{"--direction", "in"}, "triple cut (head owned elsewhere)"},
	} {
		out := filepath.Join(t.TempDir(), "parts")
		args := append([]string{"partition", "--input", in, "--format", "kg", "--parts", "2", "--method", "random", "-o", out}, tt.direction...)
		code, stdout, stderr := runNode(t, args...)
		if code != 0 || !strings.Contains(stdout, "partitioned into 2 parts (random, seed 1): "+tt.want+" ") {
			t.Errorf("%v: code %d, stdout:\n%s\nstderr:\n%s\nwant %q", tt.direction, code, stdout, stderr, tt.want)
		}
		code, stdout, stderr = runNode(t, "inspect", out)
		if code != 0 || !strings.Contains(stdout, "\n"+tt.want+" ") {
			t.Errorf("%v: inspect: code %d, stdout:\n%s\nstderr:\n%s\nwant %q", tt.direction, code, stdout, stderr, tt.want)
		}
	}
}

// TestPartitionNamesLeftovers: the temporary directory of a node
// partition killed before it put its output in place (beside the output,
// or in an empty one), and the previous output that a node partition
// --force moved aside and did not finish removing, are named by the next
// run into that output, each as what it is, and the temporary one in
// the refusal of an output that holds one: hidden, they were never
// removed or mentioned (two kills left 91 MB).
func TestPartitionNamesLeftovers(t *testing.T) {
	in := writeEdgeList(t, 12)
	root := t.TempDir()
	out := filepath.Join(root, "parts")
	beside, old := filepath.Join(root, ".parts.tmp-123"), filepath.Join(root, ".parts.old-789")
	for _, d := range []string{beside, old} {
		if err := os.MkdirAll(filepath.Join(d, "part-0"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr := runNode(t, "partition", "--input", in, "--parts", "2", "-o", out)
	if code != 0 || !strings.Contains(stdout, "note: "+beside+": the temporary output of a node partition into "+out+" that did not finish") ||
		!strings.Contains(stdout, "note: "+old+": the previous partitioning of "+out+", which a node partition --force moved aside when it replaced it and did not finish removing") {
		t.Errorf("run beside leftovers: exit %d, stdout:\n%s\nstderr: %s", code, stdout, stderr)
	}
	for _, d := range []string{beside, old} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("the leftover was removed: %v (one may be running)", err)
		}
	}
	// In an output that holds nothing else, without --force: the refusal
	// says what it is.
	empty := filepath.Join(root, "empty")
	if err := os.MkdirAll(filepath.Join(empty, ".tmp-456"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runNode(t, "partition", "--input", in, "--parts", "2", "-o", empty)
	if code != 1 || !strings.Contains(stderr, "it holds .tmp-456 (.tmp-* is the temporary output of a run that did not finish") {
		t.Errorf("output holding a leftover: exit %d, stderr %q", code, stderr)
	}
}
