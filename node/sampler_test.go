package node

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"graphnode/csr"
	"graphnode/partition"
)

// TestOpenPartRefusesAnotherFile: a sampler maps the file the node
// opened and checked. By path, a file renamed over it since (node
// partition --force to the same directory) is refused, naming both;
// through the descriptor the node hands down it maps the node's file
// still; that file rewritten in place is refused too.
func TestOpenPartRefusesAnotherFile(t *testing.T) {
	dir := t.TempDir()
	parts, other := filepath.Join(dir, "parts"), filepath.Join(dir, "other")
	for _, w := range []struct {
		dir   string
		train float64
	}{{parts, 0.5}, {other, 0.3}} {
		if err := writeSBMPart(w.dir, partition.SBMConfig{Nodes: 300, Blocks: 2, AvgDegree: 6, FeatDim: 4, Seed: 1, TrainFrac: w.train, Workers: 1}); err != nil {
			t.Fatal(err)
		}
	}
	path := PartPath(parts, 0)
	g, err := csr.Open(path, csr.OpenOptions{}) // the node's
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	id := g.Identity()
	otherBytes, err := os.ReadFile(PartPath(other, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(PartPath(other, 0), path); err != nil {
		t.Fatal(err)
	}
	replaced := func(now csr.Identity) string {
		return fmt.Sprintf("node: sampler: %s is not the partition file the node opened and checked: it was replaced or rewritten since the node started "+
			"(%v now, %v when the node opened it); restart the node to serve the new partition", path, now, id)
	}
	inherit := func() int { // the node's descriptor, as startProc hands it down
		fd, err := syscall.Dup(int(g.File().Fd()))
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}

	now, err := csr.Open(path, csr.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nowID := now.Identity()
	now.Close()
	if _, err := openPart(&SamplerSpec{Part: path, PartID: id}); err == nil || err.Error() != replaced(nowID) {
		t.Fatalf("by path: %v\nwant %s", err, replaced(nowID))
	}

	mine, err := openPart(&SamplerSpec{Part: path, PartFD: inherit(), PartID: id})
	if err != nil {
		t.Fatalf("the node's descriptor: %v", err)
	}
	train, err := mine.Mask(csr.SecTrain)
	want, _ := g.Mask(csr.SecTrain)
	if err != nil || !train.Equals(want) || mine.Path() != path {
		t.Errorf("the node's descriptor maps %s with train %d nodes (%v), want %s with %d", mine.Path(), train.GetCardinality(), err, path, want.GetCardinality())
	}
	mine.Close()

	// The node's inode, rewritten in place through its descriptor.
	w, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", g.File().Fd()), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(otherBytes); err != nil {
		t.Fatal(err)
	}
	w.Close()
	rewritten := id
	rewritten.Size, rewritten.HeaderCRC = nowID.Size, nowID.HeaderCRC
	if _, err := openPart(&SamplerSpec{Part: path, PartFD: inherit(), PartID: id}); err == nil || err.Error() != replaced(rewritten) {
		t.Fatalf("rewritten in place: %v\nwant %s", err, replaced(rewritten))
	}
}
