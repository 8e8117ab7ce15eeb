package kv

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"
)

// Sentinel errors. Every error of this package wraps one of them, so a
// caller (and a peer, through the Error message's code) can tell them apart
// with errors.Is.
var (
	ErrSpec         = errors.New("invalid table spec")
	ErrUnknownTable = errors.New("unknown table")
	ErrNotOwner     = errors.New("row not owned by this shard")
	ErrShape        = errors.New("length does not match the table's shape")
	ErrMode         = errors.New("wrong mode for this table")
	ErrStep         = errors.New("bad synchronous step")
	ErrStepFailed   = errors.New("synchronous step failed")
	ErrMalformed    = errors.New("malformed message")
	ErrNonFinite    = errors.New("gradient is not finite")
	ErrCorrupt      = errors.New("corrupt checkpoint")
	ErrVersion      = errors.New("unsupported checkpoint version")
	ErrMismatch     = errors.New("checkpoint does not match the configured table")
	// ErrResized is the ErrMismatch of a file that holds the table with
	// another number of rows (and so another shard range), every other
	// field alike: an earlier model of another size saved under the
	// name. Its text is ErrMismatch's, which it wraps.
	ErrResized = fmt.Errorf("%w", ErrMismatch)
)

// MaxNameLen bounds a table name; names also name checkpoint files.
const MaxNameLen = 64

// MaxWorld bounds the trainers of one synchronous step.
const MaxWorld = 1 << 16

// DefaultSyncTimeout is how long a synchronous step waits, from its first
// push, for the rest of its trainers before it fails.
const DefaultSyncTimeout = 60 * time.Second

// InitKind selects how a table's rows start.
type InitKind uint8

const (
	InitZeros   InitKind = 0
	InitUniform InitKind = 1 // uniform in [-Scale, Scale]
	InitNormal  InitKind = 2 // normal, mean 0, standard deviation Scale
)

// Init is a table's initialiser. Element (row, col) is drawn from a
// counter-based generator keyed by (Seed, global row, col), so a row starts
// with the same values however the table is sharded.
type Init struct {
	Kind  InitKind
	Scale float32
	Seed  uint64
}

// String is the initialiser as a table's spec words it ("uniform scale
// 0.1 seed 3"), without commas: a spec clash's message lists fields
// after ", ".
func (i Init) String() string {
	kind := map[InitKind]string{InitZeros: "zeros", InitUniform: "uniform", InitNormal: "normal"}[i.Kind]
	if kind == "" {
		kind = fmt.Sprintf("InitKind(%d)", uint8(i.Kind))
	}
	if i.Kind == InitZeros {
		return kind
	}
	return fmt.Sprintf("%s scale %s seed %d", kind, ftoa(i.Scale), i.Seed)
}

// ftoa is x, shortest.
func ftoa(x float32) string { return strconv.FormatFloat(float64(x), 'g', -1, 32) }

// KGEInitScale is DGL-KE's entity/relation init bound: rows are uniform in
// ±(gamma + 2)/dim (dglke/models/general_models.py, emb_init with eps 2.0).
func KGEInitScale(gamma float32, dim int) float32 { return (gamma + 2) / float32(dim) }

// OptKind selects the server-side optimiser.
type OptKind uint8

const (
	OptSGD     OptKind = 1
	OptAdagrad OptKind = 2
	OptAdam    OptKind = 3
	// OptAverage makes a Sync table's rows the step's averaged push
	// (w = avg): the table is then an all-reduce through the shards, for
	// trainers that keep their own optimiser. Sync tables only.
	OptAverage OptKind = 4
)

func (k OptKind) String() string {
	switch k {
	case OptSGD:
		return "sgd"
	case OptAdagrad:
		return "adagrad"
	case OptAdam:
		return "adam"
	case OptAverage:
		return "average"
	}
	return fmt.Sprintf("OptKind(%d)", uint8(k))
}

// Optimizer is the rule the owning shard applies to pushed gradients; the
// exact formulas are in optim.go and doc.go.
type Optimizer struct {
	Kind         OptKind
	LR, Eps      float32
	Beta1, Beta2 float32 // Adam only
}

// String is the optimiser as a table's spec words it ("adagrad lr 0.1
// eps 1e-10"), without commas (see Init.String): a clash of lr 0.5 with
// 0.1 said "{Kind:sgd LR:0.5 Eps:0 Beta1:0 Beta2:0}".
func (o Optimizer) String() string {
	switch o.Kind {
	case OptAverage:
		return o.Kind.String()
	case OptSGD:
		return fmt.Sprintf("%s lr %s", o.Kind, ftoa(o.LR))
	case OptAdagrad:
		return fmt.Sprintf("%s lr %s eps %s", o.Kind, ftoa(o.LR), ftoa(o.Eps))
	}
	return fmt.Sprintf("%s lr %s eps %s beta1 %s beta2 %s", o.Kind, ftoa(o.LR), ftoa(o.Eps), ftoa(o.Beta1), ftoa(o.Beta2))
}

// SGD is w -= lr·g.
func SGD(lr float32) Optimizer { return Optimizer{Kind: OptSGD, LR: lr} }

// Adagrad is DGL-KE's row-wise sparse Adagrad; DGL-KE uses eps = 1e-10.
func Adagrad(lr, eps float32) Optimizer { return Optimizer{Kind: OptAdagrad, LR: lr, Eps: eps} }

// Average is OptAverage: each synchronous step replaces the rows with
// the average of the trainers' pushes.
func Average() Optimizer { return Optimizer{Kind: OptAverage} }

// hasState reports whether the optimiser keeps state beside the rows
// (saved in checkpoints after them).
func (o Optimizer) hasState() bool { return o.Kind == OptAdagrad || o.Kind == OptAdam }

// Adam is PyTorch's Adam with a per-row step count (as DGL's SparseAdam).
func Adam(lr, beta1, beta2, eps float32) Optimizer {
	return Optimizer{Kind: OptAdam, LR: lr, Beta1: beta1, Beta2: beta2, Eps: eps}
}

// Mode says how pushes reach a table.
type Mode uint8

const (
	// Async applies every Push as it arrives (sparse embeddings, Hogwild
	// style as DGL-KE).
	Async Mode = 1
	// Sync applies one averaged update per step once all trainers of the
	// step have called PushSync (dense model parameters).
	Sync Mode = 2
)

func (m Mode) String() string {
	switch m {
	case Async:
		return "async"
	case Sync:
		return "sync"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Spec describes one table. Bounds has P+1 entries: shard p owns global
// rows [Bounds[p], Bounds[p+1]). For entity tables they are the partition
// book's bounds; for dense tables EvenBounds(rows, P).
type Spec struct {
	Name   string
	Rows   uint64
	Dim    int
	Init   Init
	Opt    Optimizer
	Mode   Mode
	Bounds []uint64
	// IDSet, when not 0, names the numbering of the rows: they are the
	// node ids of one partitioning (the node sets graph.toml's CRC-32C
	// of orig_ids.bin, partition.Manifest.Numbering, for rows = "nodes"),
	// which another partitioning of the same graph into the same ranges
	// gives to other nodes. A checkpoint
	// records it, and Load refuses a file of another nonzero IDSet
	// (ErrMismatch). 0: the rows are the table's own.
	IDSet uint32
	// IDSetBefore, when not 0, is the tag an earlier build gave the same
	// numbering (partition.Manifest.LegacyNumbering): Load accepts a file
	// that records it as well, and a save records IDSet.
	IDSetBefore uint32
	// IDSetRelations says that the rows are a knowledge graph's
	// relations, and IDSet the tag of their names (relations.txt,
	// partition.Manifest.RelationNumbering), not a partitioning's node
	// ids: Load's refusal of another IDSet says which.
	IDSetRelations bool
}

// Parts is the number of shards.
func (s *Spec) Parts() int { return len(s.Bounds) - 1 }

// ShardBytes is the memory of shard p of the table: its rows and the
// optimiser's state (Adagrad a sum per row, Adam two moments per entry
// and a step count per row), saturating at the largest uint64.
func (s *Spec) ShardBytes(p int) uint64 {
	lo, hi := s.Range(p)
	rows, per := hi-lo, s.rowBytes()
	if per > 0 && rows > math.MaxUint64/per {
		return math.MaxUint64
	}
	return rows * per
}

// rowBytes is the memory of one row, and its size in a checkpoint body:
// its float32 weights and the optimiser's state for it.
func (s *Spec) rowBytes() uint64 {
	dim := uint64(max(s.Dim, 0))
	per := 4 * dim
	switch s.Opt.Kind {
	case OptAdagrad:
		per += 4 // the sum of squared gradients
	case OptAdam:
		per += 8*dim + 4 // two moments per entry, a step count
	}
	return per
}

// Range is the global row range [lo, hi) of shard p.
func (s *Spec) Range(p int) (lo, hi uint64) { return s.Bounds[p], s.Bounds[p+1] }

// Owner is the shard owning global row id, or -1 when id >= Rows.
func (s *Spec) Owner(id uint64) int { return owner(s.Bounds, id) }

func owner(b []uint64, id uint64) int {
	if len(b) < 2 || id >= b[len(b)-1] {
		return -1
	}
	return sort.Search(len(b)-1, func(i int) bool { return b[i+1] > id })
}

// EvenBounds splits rows into parts contiguous ranges whose sizes differ
// by at most one, larger ranges first.
func EvenBounds(rows uint64, parts int) []uint64 {
	if parts < 1 {
		parts = 1
	}
	b := make([]uint64, parts+1)
	q, r := rows/uint64(parts), rows%uint64(parts)
	for p := range parts {
		n := q
		if uint64(p) < r {
			n++
		}
		b[p+1] = b[p] + n
	}
	return b
}

// Validate reports every problem of s, each naming the table and field.
func (s *Spec) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("kv: table %q: %s: %s: %w", s.Name, field, fmt.Sprintf(format, args...), ErrSpec))
	}
	if !validName(s.Name) {
		bad("name", "must be 1-%d bytes of [A-Za-z0-9_.-], not starting with '.'", MaxNameLen)
	}
	if s.Rows == 0 {
		bad("rows", "must be > 0")
	}
	if s.Dim <= 0 || s.Dim > math.MaxInt32 {
		bad("dim", "%d: must be in [1, 2^31)", s.Dim)
	}
	switch s.Init.Kind {
	case InitZeros:
	case InitUniform, InitNormal:
		if !(s.Init.Scale >= 0) || math.IsInf(float64(s.Init.Scale), 0) {
			bad("init.scale", "%v: must be finite and >= 0", s.Init.Scale)
		}
	default:
		bad("init.kind", "%d: unknown", s.Init.Kind)
	}
	o := s.Opt
	finite := func(field string, v float32) {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			bad(field, "%v: must be finite", v)
		}
	}
	finite("opt.lr", o.LR)
	finite("opt.eps", o.Eps)
	if o.LR < 0 && o.Kind != OptAverage {
		// As torch.optim refuses it: a negative step climbs the loss.
		bad("opt.lr", "%v: must be >= 0", o.LR)
	}
	switch o.Kind {
	case OptSGD:
	case OptAdagrad:
		if !(o.Eps > 0) {
			bad("opt.eps", "%v: adagrad needs eps > 0", o.Eps)
		}
	case OptAdam:
		if !(o.Eps > 0) {
			bad("opt.eps", "%v: adam needs eps > 0", o.Eps)
		}
		if !(o.Beta1 >= 0 && o.Beta1 < 1) {
			bad("opt.beta1", "%v: must be in [0, 1)", o.Beta1)
		}
		if !(o.Beta2 >= 0 && o.Beta2 < 1) {
			bad("opt.beta2", "%v: must be in [0, 1)", o.Beta2)
		}
	case OptAverage:
		if s.Mode != Sync {
			bad("opt.kind", "average needs mode sync")
		}
	default:
		bad("opt.kind", "%d: unknown", o.Kind)
	}
	if s.Mode != Async && s.Mode != Sync {
		bad("mode", "%d: must be async or sync", s.Mode)
	}
	switch {
	case len(s.Bounds) < 2:
		bad("bounds", "need at least 2 bounds, got %d", len(s.Bounds))
	case s.Bounds[0] != 0:
		bad("bounds", "start at %d, want 0", s.Bounds[0])
	case s.Bounds[len(s.Bounds)-1] != s.Rows:
		bad("bounds", "end at %d, want rows %d", s.Bounds[len(s.Bounds)-1], s.Rows)
	default:
		for i := 1; i < len(s.Bounds); i++ {
			if s.Bounds[i] < s.Bounds[i-1] {
				bad("bounds", "decrease at part %d (%d < %d)", i-1, s.Bounds[i], s.Bounds[i-1])
				break
			}
		}
	}
	return errors.Join(errs...)
}

// validName accepts names that are safe as file name prefixes.
func validName(name string) bool {
	if len(name) == 0 || len(name) > MaxNameLen || name[0] == '.' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}
