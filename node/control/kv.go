package control

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
)

// Parameter-server operations. Besides these JSON requests, a frame whose
// body does not start with '{' carries one kv wire message (package kv's
// encoding: kind byte, version byte, fields) and is answered by a frame
// holding the kv answer (docs/control.md, "kv messages").
const (
	OpKVCreate = "kv_create" // declare a table (idempotent for an equal spec)
	OpKVSave   = "kv_save"   // checkpoint every shard of every table
	OpKVDone   = "kv_done"   // the trainer finished: closing is not leaving
	OpKVDrop   = "kv_drop"   // remove a table from every node (checkpoints stay)
)

// IsKV reports whether a frame body is a kv wire message rather than a
// JSON request.
func IsKV(body []byte) bool { return len(body) > 0 && body[0] != '{' && !IsData(body) }

// Rows is a table's row count: a number, "nodes" for one row per node of
// the graph, sharded by the partition book (an entity table), or
// "relations" for one row per relation of a knowledge graph (its
// relations.txt; a relation table), split evenly.
type Rows struct {
	N         uint64
	Nodes     bool
	Relations bool
}

// rowsWords are the row counts given by a word, as JSON and TOML spell
// them.
var rowsWords = map[string]Rows{"nodes": {Nodes: true}, "relations": {Relations: true}}

// word is r's word, or "" for a count.
func (r Rows) word() string {
	switch {
	case r.Nodes:
		return "nodes"
	case r.Relations:
		return "relations"
	}
	return ""
}

// UnmarshalJSON accepts a non-negative integer, "nodes" or "relations".
func (r *Rows) UnmarshalJSON(b []byte) error {
	var w string
	if json.Unmarshal(b, &w) == nil {
		if rows, ok := rowsWords[w]; ok {
			*r = rows
			return nil
		}
	}
	n, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		// A type error, so that the decoder names the field (table.rows).
		return &json.UnmarshalTypeError{Value: string(b), Type: reflect.TypeFor[Rows]()}
	}
	*r = Rows{N: n}
	return nil
}

// MarshalJSON writes the count, "nodes" or "relations".
func (r Rows) MarshalJSON() ([]byte, error) {
	if w := r.word(); w != "" {
		return []byte(`"` + w + `"`), nil
	}
	return strconv.AppendUint(nil, r.N, 10), nil
}

// UnmarshalTOML accepts an integer, "nodes" or "relations" (node.toml
// [[kv.tables]]).
func (r *Rows) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case int64:
		if x >= 0 {
			*r = Rows{N: uint64(x)}
			return nil
		}
	case string:
		if rows, ok := rowsWords[x]; ok {
			*r = rows
			return nil
		}
	}
	if s, ok := v.(string); ok {
		return fmt.Errorf(`the string %q is neither a row count (an integer, unquoted), "nodes" nor "relations"`, s)
	}
	return fmt.Errorf(`%v is neither a row count, "nodes" nor "relations"`, v)
}

// MarshalTOML writes a bare integer, "nodes" or "relations", what
// UnmarshalTOML reads back: `node config check` prints the effective
// config with it. The TOML encoder prefers it to MarshalText, which would
// quote the count.
func (r Rows) MarshalTOML() ([]byte, error) {
	if w := r.word(); w != "" {
		return []byte(`"` + w + `"`), nil
	}
	return strconv.AppendUint(nil, r.N, 10), nil
}

// MarshalText writes the count, nodes or relations, unquoted (text logs).
func (r Rows) MarshalText() ([]byte, error) {
	if w := r.word(); w != "" {
		return []byte(w), nil
	}
	return strconv.AppendUint(nil, r.N, 10), nil
}

// TableSpec declares a kv table, in a kv_create request or in node.toml.
// Dense tables (a number of rows, or "relations") are split evenly over
// the parts; "nodes" tables follow the partition book, so a node's rows
// are its graph nodes.
type TableSpec struct {
	Name      string  `json:"name" toml:"name"`
	Rows      Rows    `json:"rows" toml:"rows"`
	Dim       int     `json:"dim" toml:"dim"`
	Init      string  `json:"init,omitempty" toml:"init"` // zeros (default), uniform, normal
	InitScale float64 `json:"init_scale,omitempty" toml:"init_scale"`
	InitSeed  uint64  `json:"init_seed,omitempty" toml:"init_seed"`
	Optimizer string  `json:"optimizer" toml:"optimizer"` // sgd, adagrad, adam, average
	LR        float64 `json:"lr,omitempty" toml:"lr"`
	// Eps, Beta1 and Beta2 of 0 are absent, filled by Validate; a file
	// may not give 0 (ExplicitZero), so 0 is not written either: the
	// effective config of a table refused before Validate filled them
	// loads back (node config check).
	Eps   float64 `json:"eps,omitempty" toml:"eps,omitzero"`     // default 1e-10 (adagrad), 1e-8 (adam)
	Beta1 float64 `json:"beta1,omitempty" toml:"beta1,omitzero"` // adam, default 0.9
	Beta2 float64 `json:"beta2,omitempty" toml:"beta2,omitzero"` // adam, default 0.999
	Mode  string  `json:"mode" toml:"mode"`                      // sync, async
}

// Validate checks what does not depend on the graph and fills the
// optimiser defaults. The error is the first of Problems: it names the
// field.
func (t *TableSpec) Validate() error {
	if ps := t.Problems(); len(ps) > 0 {
		return ps[0]
	}
	t.fillDefaults()
	return nil
}

// Problems lists every problem Validate checks for, each an *Error whose
// Key names the field (table.mode), in the order of the fields; it fills
// nothing. A config file reports them all at once.
func (t *TableSpec) Problems() []*Error {
	var ps []*Error
	bad := func(field, format string, a ...any) {
		ps = append(ps, &Error{Key: "table." + field, Msg: fmt.Sprintf("table %q: %s", t.Name, fmt.Sprintf(format, a...))})
	}
	if t.Name == "" {
		bad("name", "missing")
	}
	if t.Rows == (Rows{}) {
		bad("rows", `missing: a row count, "nodes" or "relations"`)
	}
	if t.Dim <= 0 {
		bad("dim", "%d is not positive", t.Dim)
	}
	switch t.Init {
	case "", "zeros", "uniform", "normal":
	default:
		bad("init", "%q is not one of zeros, uniform, normal", t.Init)
	}
	switch t.Mode {
	case "sync", "async":
	case "":
		bad("mode", "missing: sync (dense parameters) or async (sparse embeddings)")
	default:
		bad("mode", "%q is not one of sync, async", t.Mode)
	}
	switch t.Optimizer {
	case "average":
	case "sgd", "adagrad", "adam":
		switch {
		case t.LR == 0: // absent, or given as 0: either way no step
			bad("lr", "missing or 0 for optimizer %s: want a step size > 0", t.Optimizer)
		case t.LR < 0:
			bad("lr", "%g: want a step size > 0", t.LR)
		}
	case "":
		bad("optimizer", "missing: sgd, adagrad, adam or average")
	default:
		bad("optimizer", "%q is not one of sgd, adagrad, adam, average", t.Optimizer)
	}
	// The shards keep these as float32: a value that becomes 0 or
	// infinite there would silently train nothing, or NaN.
	for _, f := range []struct {
		name string
		v    float64
	}{{"lr", t.LR}, {"eps", t.Eps}, {"beta1", t.Beta1}, {"beta2", t.Beta2}, {"init_scale", t.InitScale}} {
		if x := float32(f.v); f.v != 0 && (x == 0 || math.IsInf(float64(x), 0)) {
			bad(f.name, "%g is outside float32's range, in which the shards keep it", f.v)
		}
	}
	return ps
}

// fillDefaults puts the defaults of a valid spec in place of its absent
// fields: init zeros, and the optimiser's eps, beta1 and beta2.
func (t *TableSpec) fillDefaults() {
	if t.Init == "" {
		t.Init = "zeros"
	}
	if t.Eps == 0 {
		switch t.Optimizer {
		case "adagrad":
			t.Eps = 1e-10
		case "adam":
			t.Eps = 1e-8
		}
	}
	if t.Optimizer == "adam" {
		if t.Beta1 == 0 {
			t.Beta1 = 0.9
		}
		if t.Beta2 == 0 {
			t.Beta2 = 0.999
		}
	}
}

// ExplicitZero refuses an eps, beta1 or beta2 given as 0 where Validate
// would take 0 for absent and put the default in its place: a trainer
// asking for Adam with beta1 0 must not get 0.9 without a word. given
// reports whether the kv_create (checkKeys) or node.toml gave a field.
// Call it before Validate, which fills the defaults.
func (t *TableSpec) ExplicitZero(given func(field string) bool) error {
	for _, f := range []struct {
		name string
		v    float64
		def  string // "": no default for this optimiser
	}{
		{"eps", t.Eps, map[string]string{"adagrad": "1e-10", "adam": "1e-8"}[t.Optimizer]},
		{"beta1", t.Beta1, map[string]string{"adam": "0.9"}[t.Optimizer]},
		{"beta2", t.Beta2, map[string]string{"adam": "0.999"}[t.Optimizer]},
	} {
		if f.v == 0 && f.def != "" && given(f.name) {
			return &Error{Key: "table." + f.name, Msg: fmt.Sprintf("table %q: %s 0 is not supported: 0 stands for an absent %s, whose default is %s", t.Name, f.name, f.name, f.def)}
		}
	}
	return nil
}

// TableInfo answers kv_create: the table as the node holds it.
type TableInfo struct {
	Name    string   `json:"name"`
	Rows    uint64   `json:"rows"`
	Dim     int      `json:"dim"`
	Bounds  []uint64 `json:"bounds"`  // shard p owns rows [bounds[p], bounds[p+1])
	Created bool     `json:"created"` // false: it existed with this spec
	Version uint64   `json:"version"` // this node's shard: sync steps or pushes applied
}

// SaveInfo answers kv_save.
type SaveInfo struct {
	Dir    string   `json:"dir"`    // checkpoint directory on each node
	Tables []string `json:"tables"` // tables saved
}

// DropInfo answers kv_drop: whether this node held the table, and which
// of the peers, which drop theirs too, held it (one that did not is not
// an error). DroppedParts and UnknownParts are left out when empty, and
// absent from the answers of nodes built before them.
type DropInfo struct {
	Name    string `json:"name"`
	Dropped bool   `json:"dropped"` // this node held it
	// DroppedParts are the parts of the peers that held it, ascending.
	DroppedParts []int `json:"dropped_parts,omitempty"`
	// UnknownParts are the parts of peers of an older build, whose
	// answer does not say whether they held it.
	UnknownParts []int `json:"unknown_parts,omitempty"`
}

// Any reports whether some node is known to have held the table.
func (d *DropInfo) Any() bool { return d.Dropped || len(d.DroppedParts) > 0 }

// MarshalKVRequest is the JSON of a kv request for a peer node (the node
// forwards kv_create and kv_save to every peer over the mesh).
func MarshalKVRequest(r *Request) ([]byte, error) { return json.Marshal(r) }
