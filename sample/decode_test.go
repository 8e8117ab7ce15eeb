package sample

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/batch_v1.{bin,json}")

// goldenBatch is the batch of testdata/batch_v1.bin: 3 seeds (one without
// neighbours), 2 hops of fanout 2 over a fixed 10-node graph, f32 features
// x[v] = (v, v + 0.5), labels v mod 3 with node 3's missing.
func goldenBatch(t testing.TB) []byte {
	t.Helper()
	return record(t, goldenSampler(t), BatchKey{Seed: 42, Epoch: 1, Rank: 0, Batch: 7}, []uint64{2, 0, 3})
}

// goldenSampler samples a fixed 10-node graph with fanouts 2, 2.
func goldenSampler(t testing.TB) *Sampler {
	t.Helper()
	lists := [][]uint64{{1, 2, 3}, {0, 4}, {5, 6, 7, 8}, {}, {9}, {0, 2}, {1}, {2, 3, 9}, {}, {4, 8}}
	indptr := []uint64{0}
	var indices []uint64
	feat := make([]float32, 0, 20)
	labels := make([]int32, 0, 10)
	for v, l := range lists {
		indices = append(indices, l...)
		indptr = append(indptr, uint64(len(indices)))
		feat = append(feat, float32(v), float32(v)+0.5)
		labels = append(labels, int32(v%3))
	}
	labels[3] = -1
	fb := make([]byte, 4*len(feat))
	putF32s(fb, feat)
	m, err := NewMem(MemData{Indptr: indptr, Indices: indices, Schema: Schema{FeatDim: 2, XType: F32, LabelDim: 1}, Feat: fb, Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	return newSampler(t, m, m, []int{2, 2}, false)
}

// goldenLinkBatch is the link batch of testdata/batch_link_v1.bin: over
// goldenBatch's graph, the seed edges 2→0 and 7→9, two negatives each,
// the seed edges' own edges excluded, 2 hops of fanout 2.
func goldenLinkBatch(t testing.TB) []byte {
	t.Helper()
	s := goldenSampler(t)
	b, err := s.SampleLink(context.Background(), BatchKey{Seed: 42, Epoch: 1, Rank: 0, Batch: 3}, []uint64{2, 7}, []uint64{0, 9},
		LinkOptions{NegRatio: 2, NumNodes: 10, Exclude: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Gather(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	size, err := EncodedSize(b)
	if err != nil {
		t.Fatal(err)
	}
	rec := aligned(size)
	if _, err := Encode(rec, b); err != nil {
		t.Fatal(err)
	}
	return rec
}

// goldenJSON is the decoded form a Python reader compares against.
type goldenJSON struct {
	Magic           string            `json:"magic"`
	Major           int               `json:"major"`
	Minor           int               `json:"minor"`
	Kind            Kind              `json:"kind"`
	RecordLen       int               `json:"record_len"`
	Epoch           uint64            `json:"epoch"`
	Batch           uint64            `json:"batch"`
	BatchSize       uint64            `json:"batch_size"`
	NumNodes        uint64            `json:"num_nodes"`
	NumEdges        uint64            `json:"num_edges"`
	Hops            uint32            `json:"hops"`
	FeatDim         uint32            `json:"feat_dim"`
	XDType          DType             `json:"x_dtype"`
	LabelDim        uint32            `json:"label_dim"`
	Sections        map[string][2]int `json:"sections"` // name → [offset, length]
	NID             []uint64          `json:"n_id"`
	EdgeIndex       [2][]int64        `json:"edge_index"`
	NumSampledNodes []int64           `json:"num_sampled_nodes"`
	NumSampledEdges []int64           `json:"num_sampled_edges"`
	X               [][]float32       `json:"x"`
	Y               [][]int64         `json:"y"`
	// Link batches (minor 1).
	Pairs          uint64     `json:"pairs,omitempty"`
	EdgeLabelIndex [2][]int64 `json:"edge_label_index,omitzero"`
	EdgeLabel      []float32  `json:"edge_label,omitempty"`
}

var sectionNames = [NumSections]string{"n_id", "edge_index", "num_sampled_nodes", "num_sampled_edges", "x", "y", "message", "edge_label_index", "edge_label"}

func describe(v *View) goldenJSON {
	h := v.Header
	g := goldenJSON{
		Magic: Magic, Major: MajorVersion, Minor: int(v.Minor), Kind: h.Kind, RecordLen: v.Size,
		Epoch: h.Epoch, Batch: h.Index, BatchSize: h.BatchSize, NumNodes: h.NumNodes, NumEdges: h.NumEdges,
		Hops: h.Hops, FeatDim: h.FeatDim, XDType: h.XType, LabelDim: h.LabelDim,
		Sections: map[string][2]int{}, NID: v.NID, EdgeIndex: [2][]int64{v.Row(), v.Col()},
		NumSampledNodes: v.NumSampledNodes, NumSampledEdges: v.NumSampledEdges,
	}
	for i, s := range v.Sections {
		if v.Minor == 0 && i >= SecEdgeLabelIndex {
			break // not in a minor 0 record
		}
		g.Sections[sectionNames[i]] = [2]int{int(s.Off), int(s.Len)}
	}
	if p := int(h.Pairs); p > 0 {
		g.Pairs = h.Pairs
		g.EdgeLabelIndex = [2][]int64{v.EdgeLabelIndex[:p], v.EdgeLabelIndex[p:]}
		g.EdgeLabel = v.EdgeLabel
	}
	x := v.XF32()
	for i := range int(h.NumNodes) {
		g.X = append(g.X, x[i*int(h.FeatDim):(i+1)*int(h.FeatDim)])
	}
	for i := range int(h.BatchSize) {
		g.Y = append(g.Y, v.Y[i*int(h.LabelDim):(i+1)*int(h.LabelDim)])
	}
	return g
}

// The encoder's bytes, and the sampler's choices behind them, are pinned
// by testdata/batch_v1.bin; its decoded contents by batch_v1.json, which
// the Python client's tests read too.
func TestGolden(t *testing.T) {
	checkGolden(t, "batch_v1", goldenBatch(t))
	checkGolden(t, "batch_link_v1", goldenLinkBatch(t))
	// A record of minor version 0 (no link sections) still decodes.
	old, err := os.ReadFile(filepath.Join("testdata", "batch_v1_0.bin"))
	if err != nil {
		t.Fatal(err)
	}
	checkGoldenJSON(t, "batch_v1_0", alignedCopy(old))
}

// checkGolden compares rec with testdata/name.bin and its decoded form
// with name.json (-update rewrites both).
func checkGolden(t *testing.T, name string, rec []byte) {
	t.Helper()
	v, err := Decode(rec)
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.MarshalIndent(describe(&v), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	js = append(js, '\n')
	binPath, jsonPath := filepath.Join("testdata", name+".bin"), filepath.Join("testdata", name+".json")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(binPath, rec, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(jsonPath, js, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wantBin, err := os.ReadFile(binPath)
	if err != nil {
		t.Fatalf("%v (regenerate with go test ./sample -run Golden -update)", err)
	}
	if !bytes.Equal(rec, wantBin) {
		t.Errorf("encoded golden batch differs from %s: the record format or the sampler changed (regenerate with -update only if that is intended)", binPath)
	}
	checkGoldenJSON(t, name, alignedCopy(wantBin))
}

// checkGoldenJSON decodes rec, the bytes of testdata/name.bin, and
// compares its contents with name.json.
func checkGoldenJSON(t *testing.T, name string, rec []byte) {
	t.Helper()
	binPath, jsonPath := filepath.Join("testdata", name+".bin"), filepath.Join("testdata", name+".json")
	wantJSON, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	// The committed bytes decode to the committed description.
	gv, err := Decode(rec)
	if err != nil {
		t.Fatalf("%s: %v", binPath, err)
	}
	var got, want goldenJSON
	gj, _ := json.Marshal(describe(&gv))
	if err := json.Unmarshal(gj, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(wantJSON, &want); err != nil {
		t.Fatalf("%s: %v", jsonPath, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s decodes to\n%s\nwant %s", binPath, gj, wantJSON)
	}
}

func alignedCopy(b []byte) []byte {
	r := aligned(len(b))
	copy(r, b)
	return r
}

// FuzzDecode: whatever decodes re-encodes to a record that decodes to the
// same contents. decode skips the CRC so that mutations reach the checks
// behind it; Decode must agree with it on records with a valid CRC.
func FuzzDecode(f *testing.F) {
	for _, b := range sampleBatches(f) {
		size, _ := EncodedSize(b)
		rec := aligned(size)
		Encode(rec, b)
		f.Add(rec)
	}
	f.Add(goldenBatch(f))
	f.Add(goldenLinkBatch(f))
	if old, err := os.ReadFile(filepath.Join("testdata", "batch_v1_0.bin")); err == nil {
		f.Add(old)
	}
	for _, k := range []Kind{KindEndOfEpoch, KindError, KindEndOfStream} {
		rec := aligned(ControlSize("boom"))
		EncodeControl(rec, k, 1, 2, "boom")
		f.Add(rec)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rec := alignedCopy(data)
		v, err := decode(rec)
		if err != nil {
			return
		}
		// Decode is decode plus the CRC: it may only refuse for the CRC.
		if _, err := Decode(rec); err != nil && !strings.Contains(err.Error(), "CRC") {
			t.Fatalf("decode accepts what Decode refuses with %v", err)
		}
		var out []byte
		if v.Header.Kind == KindBatch {
			b := v.Batch()
			size, err := EncodedSize(&b)
			if err != nil {
				t.Fatalf("EncodedSize of a decoded batch: %v", err)
			}
			out = aligned(size)
			if _, err := Encode(out, &b); err != nil {
				t.Fatalf("Encode of a decoded batch: %v", err)
			}
		} else {
			out = aligned(ControlSize(string(v.Message)))
			if _, err := EncodeControl(out, v.Header.Kind, v.Header.Epoch, v.Header.Index, string(v.Message)); err != nil {
				t.Fatalf("EncodeControl of a decoded record: %v", err)
			}
		}
		v2, err := Decode(out)
		if err != nil {
			t.Fatalf("re-encoded record: %v", err)
		}
		if v2.Header != v.Header || !reflect.DeepEqual(v2.Batch(), v.Batch()) || !bytes.Equal(v2.Message, v.Message) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", v.Header, v2.Header)
		}
	})
}
