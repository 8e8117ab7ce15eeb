package partition

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"unicode"

	"github.com/BurntSushi/toml"
)

// ErrManifest: graph.toml is not a valid description of its directory.
var ErrManifest = errors.New("invalid manifest")

// ManifestVersion is the graph.toml format this build writes and reads.
const ManifestVersion = 1

// Names of the files in a parts/ directory.
const (
	ManifestFile     = "graph.toml"
	OrigIDsFile      = "orig_ids.bin"      // u64 LE: new id -> original id
	NamesFile        = "names.txt"         // string ids: line i = name of original index i
	RelationsFile    = "relations.txt"     // knowledge graphs: line r = name of relation r
	TriplesValidFile = "triples-valid.bin" // knowledge graphs: u64 LE (head, rel, tail)
	TriplesTestFile  = "triples-test.bin"
)

// PartFile is the slash-separated path of partition p's file.
func PartFile(p int) string { return fmt.Sprintf("part-%d/part.csr", p) }

// EvalTriples reports whether path (a slash path graph.toml lists) is a
// knowledge graph's valid or test triples: small beside a part file, and
// read by every node kge evaluation, so every host holds them with its
// part (node fetch brings them; inspect --part K checks them).
func EvalTriples(path string) bool {
	return path == TriplesValidFile || path == TriplesTestFile
}

// Manifest is graph.toml: what a parts/ directory holds and how it was
// made. It is written last, so a directory with a valid manifest is whole.
type Manifest struct {
	Version  int    `toml:"version"`
	Name     string `toml:"name"`
	Checksum string `toml:"checksum"` // identifies the partitioning; see SetChecksum

	Nodes      uint64 `toml:"nodes"`
	Edges      uint64 `toml:"edges"` // stored edges, over all partitions
	Parts      int    `toml:"parts"`
	Method     string `toml:"method"`
	Seed       uint64 `toml:"seed"`
	Direction  string `toml:"direction"` // "in" or "out"
	Undirected bool   `toml:"undirected"`
	SelfLoops  string `toml:"self_loops"` // cleaning policies applied
	Duplicates string `toml:"duplicates"`
	Split      string `toml:"split"`   // how the splits were made (ParseSplit form)
	IDKind     string `toml:"id_kind"` // "int" or "string"

	FeatDim    int      `toml:"feat_dim"`
	FeatDtype  string   `toml:"feat_dtype"` // "f32", "f16", or "" without features
	LabelDim   int      `toml:"label_dim"`
	Classes    int      `toml:"classes"`
	ClassNames []string `toml:"class_names,omitempty"`

	Train uint64 `toml:"train"`
	Val   uint64 `toml:"val"`
	Test  uint64 `toml:"test"`

	// Knowledge graphs only.
	Relations    int    `toml:"relations,omitzero"`
	TriplesValid uint64 `toml:"triples_valid,omitzero"`
	TriplesTest  uint64 `toml:"triples_test,omitzero"`

	// Constraints lists the balance constraints asked for (nodes, edges,
	// train) and Imbalance their bound on max/mean; Achieved is what the
	// partitioning reached, for every quantity whether asked for or not.
	Constraints []string        `toml:"balance,omitempty"`
	Imbalance   float64         `toml:"imbalance,omitzero"`
	Achieved    BalanceAchieved `toml:"balance_achieved,omitzero"`

	// Fanouts are the sampling fanouts of the read estimate (heat of each
	// part's training nodes); empty when nothing was estimated.
	Fanouts   []int `toml:"fanouts,omitempty"`
	BatchSize int   `toml:"batch_size,omitzero"` // of the estimate; 0: visits without dedup
	// CacheRatio or CacheBytes bounded every part's cache of hot nodes
	// owned elsewhere (cache_ids / cache_feat); both 0: no cache.
	CacheRatio float64 `toml:"cache_ratio,omitzero"`
	CacheBytes int64   `toml:"cache_bytes,omitzero"`

	// Stats holds every ingestion counter of Stats, snake_case.
	Stats map[string]int64 `toml:"stats"`

	Part []PartEntry `toml:"part"`
	File []FileEntry `toml:"file"`
}

// PartEntry describes partition Index.
type PartEntry struct {
	Index   int    `toml:"index"`
	Start   uint64 `toml:"start"` // owned global ids [Start, End)
	End     uint64 `toml:"end"`
	Edges   uint64 `toml:"edges"`
	Train   uint64 `toml:"train"`
	Val     uint64 `toml:"val"`
	Test    uint64 `toml:"test"`
	EdgeCut uint64 `toml:"edge_cut"`       // stored edges whose neighbour is owned elsewhere
	Cache   uint64 `toml:"cache,omitzero"` // cached nodes owned elsewhere (cache_ids)
	// MaxDegree is the most stored neighbours of an owned node: every
	// node of a cluster bounds a fanout -1 batch by the largest of the
	// set. 0 with edges: a graph.toml written before it was recorded.
	MaxDegree uint64 `toml:"max_degree,omitzero"`
	// HeaderCRC is the CRC-32C the part file's header stores (8 hex
	// digits), which covers every section's CRC: OpenDir and OpenPart
	// check it with one read of the header (see partheader.go). Empty in
	// a graph.toml written before it was recorded.
	HeaderCRC string `toml:"header_crc32c,omitempty"`

	// Expected feature reads of one epoch of this part's trainer (rank p
	// of P on split train, see TrainerSeeds) with the manifest's fanouts
	// (see EstimateHeat), and the shares of them served by owned rows, the
	// cache and peers.
	Reads       float64 `toml:"reads,omitzero"`
	ReadsLocal  float64 `toml:"reads_local,omitzero"`
	ReadsCached float64 `toml:"reads_cached,omitzero"`
	ReadsRemote float64 `toml:"reads_remote,omitzero"`
}

// BalanceAchieved is max / mean over the partitions of owned nodes,
// stored edges and training nodes (0 where the total is 0).
type BalanceAchieved struct {
	Nodes float64 `toml:"nodes"`
	Edges float64 `toml:"edges"`
	Train float64 `toml:"train"`
}

// FileEntry is one file of the directory with its size and CRC-32C.
type FileEntry struct {
	Path   string `toml:"path"` // slash-separated, relative to the directory
	Size   int64  `toml:"size"`
	CRC32C string `toml:"crc32c"` // 8 hex digits
}

// StatsMap turns s into the manifest's snake_case counters.
func StatsMap(s Stats) map[string]int64 {
	out := make(map[string]int64)
	v := reflect.ValueOf(s)
	for i := range v.NumField() {
		out[snake(v.Type().Field(i).Name)] = v.Field(i).Int()
	}
	return out
}

// snake turns EdgesRead into edges_read.
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Book is the partition book of the manifest's node ranges.
func (m *Manifest) Book() (Book, error) {
	if len(m.Part) == 0 {
		return Book{}, fmt.Errorf("partition: %s: no partitions: %w", ManifestFile, ErrManifest)
	}
	bounds := make([]uint64, len(m.Part)+1)
	for i, p := range m.Part {
		bounds[i] = p.Start
		bounds[i+1] = p.End
	}
	return NewBook(bounds)
}

// MaxDegree is the most stored neighbours of any node of the set, and
// false when a part with edges has none recorded (an older graph.toml).
func (m *Manifest) MaxDegree() (uint64, bool) {
	var d uint64
	for _, p := range m.Part {
		if p.Edges > 0 && p.MaxDegree == 0 {
			return 0, false
		}
		d = max(d, p.MaxDegree)
	}
	return d, true
}

// EdgeCut is the number of stored edges whose neighbour is owned by
// another partition, over all partitions.
func (m *Manifest) EdgeCut() uint64 {
	var cut uint64
	for _, p := range m.Part {
		cut += p.EdgeCut
	}
	return cut
}

// CutName names what EdgeCut counts, as node partition and node inspect
// print it. A knowledge graph's triple is stored with the entity that
// owns its edge (direction out: its head, as DGL-KE does; in: its tail),
// and is cut when the other entity is owned elsewhere: with --direction
// in, "tail owned elsewhere" named the entity the triple is stored with.
func (m *Manifest) CutName() string {
	switch {
	case m.Relations == 0:
		return "edge cut"
	case m.Direction == "in":
		return "triple cut (head owned elsewhere)"
	}
	return "triple cut (tail owned elsewhere)"
}

// Balance is max / mean over the partitions of owned nodes, stored edges
// and training nodes (0 where the total is 0).
func (m *Manifest) Balance() (nodes, edges, train float64) {
	var maxN, maxE, maxT, sumT uint64
	for _, p := range m.Part {
		maxN, maxE, maxT = max(maxN, p.End-p.Start), max(maxE, p.Edges), max(maxT, p.Train)
		sumT += p.Train
	}
	k := float64(len(m.Part))
	return balance(maxN, m.Nodes, k), balance(maxE, m.Edges, k), balance(maxT, sumT, k)
}

// Bytes is the size of the files the manifest lists (graph.toml aside).
func (m *Manifest) Bytes() int64 {
	var n int64
	for _, f := range m.File {
		n += f.Size
	}
	return n
}

// Lookup is the entry of the file at slash path p, or nil.
func (m *Manifest) Lookup(p string) *FileEntry {
	for i := range m.File {
		if m.File[i].Path == p {
			return &m.File[i]
		}
	}
	return nil
}

// Numbering is a 32-bit tag of the node numbering, never 0: the CRC-32C
// that graph.toml records of orig_ids.bin (new id -> original id), and,
// with string ids, combined with names.txt's (original index -> name).
// Two partitionings of one graph into the same ranges number the nodes
// otherwise (kv checkpoints of "nodes" tables record it), and so do two
// graphs of as many nodes partitioned alike whose names differ (WN18 and
// WN18RR: the same orig_ids.bin, other entities); 0 when graph.toml lists
// no orig_ids.bin.
func (m *Manifest) Numbering() uint32 {
	orig, ok := m.fileCRC(OrigIDsFile)
	if !ok {
		return 0
	}
	names, ok := m.fileCRC(NamesFile)
	if !ok {
		return max(orig, 1)
	}
	var b [8]byte
	binary.LittleEndian.PutUint32(b[:], orig)
	binary.LittleEndian.PutUint32(b[4:], names)
	return max(crc32.Checksum(b[:], castagnoli()), 1)
}

// LegacyNumbering is the tag builds before names.txt was part of
// Numbering gave the same numbering (orig_ids.bin's CRC alone), which
// their kv checkpoints record; 0 when it is Numbering's (no names.txt) or
// there is none.
func (m *Manifest) LegacyNumbering() uint32 {
	orig, ok := m.fileCRC(OrigIDsFile)
	if _, names := m.fileCRC(NamesFile); !ok || !names {
		return 0
	}
	return max(orig, 1)
}

// RelationNumbering is a 32-bit tag of a knowledge graph's relation ids,
// never 0: the CRC-32C that graph.toml records of relations.txt (line r =
// the name of relation r). kv checkpoints of "relations" tables record
// it, so that a relation table of another graph of as many relations
// (FB15k's 1345 against another's, or one whose dictionary orders them
// otherwise) is refused, not loaded as these relations' rows; 0 when
// graph.toml lists no relations.txt.
func (m *Manifest) RelationNumbering() uint32 {
	crc, ok := m.fileCRC(RelationsFile)
	if !ok {
		return 0
	}
	return max(crc, 1)
}

// fileCRC is the CRC-32C graph.toml records of the file at slash path p;
// false when it lists no such file or its CRC is unreadable.
func (m *Manifest) fileCRC(p string) (uint32, bool) {
	f := m.Lookup(p)
	if f == nil {
		return 0, false
	}
	v, err := strconv.ParseUint(f.CRC32C, 16, 32)
	if err != nil {
		return 0, false
	}
	return uint32(v), true
}

// Encode writes m as TOML.
func (m *Manifest) Encode(w io.Writer) error {
	if err := toml.NewEncoder(w).Encode(m); err != nil {
		return fmt.Errorf("partition: encode %s: %w", ManifestFile, err)
	}
	return nil
}

// contentHash hashes m's encoding with the checksum field left empty.
func (m *Manifest) contentHash() (string, error) {
	c := *m
	c.Checksum = ""
	var buf bytes.Buffer
	if err := c.Encode(&buf); err != nil {
		return "", err
	}
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:16]), nil
}

// SetChecksum sets m.Checksum to one hash over the manifest's content,
// the file checksums included, so it identifies the partitioning: two
// directories share it only when every file and count is the same.
func (m *Manifest) SetChecksum() error {
	h, err := m.contentHash()
	if err != nil {
		return err
	}
	m.Checksum = h
	return nil
}

// OpenDir reads dir/graph.toml, refuses unknown keys, and checks the
// manifest and the files it lists (presence and size; CRCs are checked by
// inspect --verify). It reports every problem found, joined, each naming
// the file and the key.
func OpenDir(dir string) (*Manifest, error) {
	return openManifest(dir, func(string) bool { return true })
}

// OpenPart reads and checks dir/graph.toml as OpenDir does, but of the
// files it lists requires on disk only the one a node serving part reads,
// part-<part>/part.csr: each host of a cluster holds graph.toml and its
// own part, not the others' (nor the id maps, which only tools that map
// ids back read).
func OpenPart(dir string, part int) (*Manifest, error) {
	return openManifest(dir, func(p string) bool { return p == PartFile(part) })
}

// OpenManifest reads and checks dir/graph.toml as OpenDir does, but none
// of the files it lists needs to be on disk: for a host that holds none
// of them (a client node of server-client mode needs the partition book
// and the set's checksum only).
func OpenManifest(dir string) (*Manifest, error) {
	return openManifest(dir, func(string) bool { return false })
}

// openManifest reads and checks graph.toml, and the presence and size of
// each file it lists for which onDisk is true.
func openManifest(dir string, onDisk func(path string) bool) (*Manifest, error) {
	file := filepath.Join(dir, ManifestFile)
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("partition: %w", err)
	}
	return decodeManifest(data, file, dir, onDisk)
}

// ParseManifest decodes and checks the bytes of a graph.toml that is not
// on disk yet (a node fetching it from a peer), as OpenManifest checks a
// file: every problem, joined, each naming name and the key.
func ParseManifest(data []byte, name string) (*Manifest, error) {
	return decodeManifest(data, name, "", func(string) bool { return false })
}

// decodeManifest decodes data, the graph.toml called file in dir, and
// checks it and the files it lists for which onDisk is true.
func decodeManifest(data []byte, file, dir string, onDisk func(path string) bool) (*Manifest, error) {
	var m Manifest
	md, err := toml.Decode(string(data), &m)
	if err != nil {
		return nil, fmt.Errorf("partition: %s: %w: %w", file, err, ErrManifest)
	}
	var errs []error
	for _, k := range md.Undecoded() {
		errs = append(errs, fmt.Errorf("partition: %s: key %q: unknown key: %w", file, k.String(), ErrManifest))
	}
	errs = append(errs, m.problems(file)...)
	errs = append(errs, m.fileProblems(dir, file, onDisk)...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &m, nil
}
