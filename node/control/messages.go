package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"

	"graphnode/shm"
)

// Operations (the "op" field of a request).
const (
	OpOpenLoader  = "open_loader"
	OpCloseLoader = "close_loader"
	OpStats       = "stats"
)

// Limits on open_loader fields.
const (
	MaxWorkers     = 64
	MaxConcurrency = 256
	MaxHops        = 16
	MaxBatchSize   = 1 << 20
	MaxEpochs      = 1 << 20
)

// Splits a loader may draw its seeds from.
var splits = []string{"train", "val", "test"}

// Request is one message from a trainer. Fields not used by Op must be
// absent or zero. See docs/control.md for every field and its default.
type Request struct {
	Op       string     `json:"op"`
	LoaderID uint64     `json:"loader_id,omitempty"` // close_loader
	Table    *TableSpec `json:"table,omitempty"`     // kv_create
	Name     string     `json:"name,omitempty"`      // kv_drop
	// ReplaceResized (kv_create): with kv.load, a checkpoint file that
	// holds the table with another number of rows, every other field
	// alike (kv.ErrResized), is not loaded: the table starts from its
	// initial rows and the next kv_save replaces the file, which the
	// node's exit save leaves as it is until then (kv.Store.KeepFiles).
	// For a table whose size follows a model (node train --save's
	// parameters).
	ReplaceResized bool `json:"replace_resized,omitempty"`
	LoaderOptions
}

// LoaderOptions are the fields of an open_loader request.
type LoaderOptions struct {
	Split       string   `json:"split,omitempty"`
	SeedIDs     []uint64 `json:"seed_ids,omitempty"`
	Fanouts     []int    `json:"fanouts,omitempty"`
	BatchSize   int      `json:"batch_size,omitempty"`
	Shuffle     bool     `json:"shuffle"`
	DropLast    bool     `json:"drop_last"`
	Epochs      int      `json:"epochs,omitempty"`
	Seed        uint64   `json:"seed"`
	Rank        int      `json:"rank"`
	WorldSize   int      `json:"world_size,omitempty"`
	Workers     int      `json:"workers,omitempty"`     // 0: the node's samplers.workers
	Concurrency int      `json:"concurrency,omitempty"` // 0: the node's samplers.concurrency
	RingSize    string   `json:"ring_size,omitempty"`   // "": the node's rings.size
	Features    bool     `json:"features"`
	Labels      bool     `json:"labels"`
	// Link prediction (instead of split or seed_ids): batches of
	// batch_size seed edges, each with neg_ratio negatives (the same
	// source, a uniform destination), sampled from their endpoints; with
	// exclude_seed_edges the sampled edges between a seed edge's ends are
	// left out.
	SeedEdges        *SeedEdges `json:"seed_edges,omitempty"`
	NegRatio         int        `json:"neg_ratio,omitempty"`
	ExcludeSeedEdges bool       `json:"exclude_seed_edges,omitempty"`
}

// SeedEdges are a link loader's seed edges: Src[i] → Dst[i], relabelled
// global ids.
type SeedEdges struct {
	Src []uint64 `json:"src"`
	Dst []uint64 `json:"dst"`
}

// MaxNegRatio bounds neg_ratio (sample.MaxNegRatio).
const MaxNegRatio = 1024

// DefaultLoaderOptions are what an open_loader request gets for each
// field it leaves out.
func DefaultLoaderOptions() LoaderOptions {
	return LoaderOptions{
		BatchSize: 512,
		Epochs:    1,
		WorldSize: 1,
		Features:  true,
		Labels:    true,
	}
}

// DecodeRequest decodes and validates one request body. Absent open_loader
// fields get DefaultLoaderOptions. The error, if any, is a *Error whose Key
// names the offending field.
func DecodeRequest(body []byte) (Request, error) {
	seen, kerr := checkKeys(body)
	if kerr != nil {
		return Request{}, kerr
	}
	req := Request{LoaderOptions: DefaultLoaderOptions()}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return Request{}, decodeError(err)
	}
	// More misses a stray '}' or ']'; the rest of the body must be blank.
	if len(bytes.TrimSpace(body[dec.InputOffset():])) != 0 {
		return Request{}, &Error{Msg: "trailing data after the JSON object"}
	}
	if t := req.Table; t != nil {
		if err := t.ExplicitZero(func(f string) bool { return seen["table."+f] }); err != nil {
			return Request{}, err
		}
	}
	if err := req.Validate(); err != nil {
		return Request{}, err
	}
	return req, nil
}

// decodeError turns a JSON decoding error into an *Error naming the field.
func decodeError(err error) *Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Type == reflect.TypeFor[Rows]() {
			return &Error{Key: te.Field, Msg: fmt.Sprintf(`%s is neither a row count nor "nodes"`, te.Value)}
		}
		return &Error{Key: strings.TrimPrefix(te.Field, "LoaderOptions."), Msg: fmt.Sprintf("a JSON %s is not a valid %s", te.Value, te.Type)}
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return &Error{Key: strings.Trim(name, `"`), Msg: "unknown field"}
	}
	return &Error{Msg: "bad JSON: " + strings.TrimPrefix(msg, "json: ")}
}

// Validate checks the request's fields, not what depends on the graph
// (seed ids in range, ring size against the record size: the node checks
// those). It returns the first problem as a *Error naming its field.
func (r *Request) Validate() error {
	switch r.Op {
	case OpOpenLoader, OpCloseLoader, OpStats, OpKVCreate, OpKVSave, OpKVDone, OpKVDrop:
		if name := r.otherOpField(); name != "" {
			return &Error{Key: name, Msg: "not allowed in " + r.Op}
		}
	}
	switch r.Op {
	case OpOpenLoader:
		return r.LoaderOptions.Validate()
	case OpCloseLoader:
		if r.LoaderID == 0 {
			return &Error{Key: "loader_id", Msg: "missing"}
		}
	case OpStats, OpKVSave, OpKVDone:
	case OpKVCreate:
		if r.Table == nil {
			return &Error{Key: "table", Msg: "missing: the table's spec"}
		}
		return r.Table.Validate()
	case OpKVDrop:
		if r.Name == "" {
			return &Error{Key: "name", Msg: "missing: the table to drop"}
		}
	case "":
		return &Error{Key: "op", Msg: "missing"}
	default:
		return &Error{Key: "op", Msg: fmt.Sprintf("%q is not one of open_loader, close_loader, stats, kv_create, kv_save, kv_done, kv_drop", r.Op)}
	}
	return nil
}

// otherOpField names the first field r sets that its op does not use, ""
// when none. An open_loader field at its zero or at its default value
// counts as absent: a client that marshals a whole Request sends every
// field without omitempty (shuffle, seed, features, ...).
func (r *Request) otherOpField() string {
	switch {
	case r.Op != OpCloseLoader && r.LoaderID != 0:
		return "loader_id"
	case r.Op != OpKVCreate && r.Table != nil:
		return "table"
	case r.Op != OpKVDrop && r.Name != "":
		return "name"
	case r.Op != OpKVCreate && r.ReplaceResized:
		return "replace_resized"
	case r.Op == OpOpenLoader:
		return ""
	}
	o, d := r.LoaderOptions, DefaultLoaderOptions()
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"split", o.Split != ""},
		{"seed_ids", o.SeedIDs != nil},
		{"fanouts", o.Fanouts != nil},
		{"batch_size", o.BatchSize != 0 && o.BatchSize != d.BatchSize},
		{"shuffle", o.Shuffle},
		{"drop_last", o.DropLast},
		{"epochs", o.Epochs != 0 && o.Epochs != d.Epochs},
		{"seed", o.Seed != 0},
		{"rank", o.Rank != 0},
		{"world_size", o.WorldSize != 0 && o.WorldSize != d.WorldSize},
		{"workers", o.Workers != 0},
		{"concurrency", o.Concurrency != 0},
		{"ring_size", o.RingSize != ""},
		{"seed_edges", o.SeedEdges != nil},
		{"neg_ratio", o.NegRatio != 0},
		{"exclude_seed_edges", o.ExcludeSeedEdges},
	} {
		if f.set {
			return f.name
		}
	}
	return ""
}

// Validate checks open_loader options; see Request.Validate.
func (o *LoaderOptions) Validate() error {
	given := 0
	for _, g := range []bool{o.Split != "", o.SeedIDs != nil, o.SeedEdges != nil} {
		if g {
			given++
		}
	}
	switch {
	case given == 0:
		return &Error{Key: "split", Msg: `missing: give split ("train", "val", "test"), seed_ids or seed_edges`}
	case given > 1 && o.SeedEdges != nil:
		return &Error{Key: "seed_edges", Msg: "give split, seed_ids or seed_edges, one of them"}
	case o.Split != "" && o.SeedIDs != nil:
		return &Error{Key: "seed_ids", Msg: "give split or seed_ids, not both"}
	case o.SeedEdges != nil && (len(o.SeedEdges.Src) == 0 || len(o.SeedEdges.Src) != len(o.SeedEdges.Dst)):
		return &Error{Key: "seed_edges", Msg: fmt.Sprintf("%d sources and %d destinations: want as many, at least one", len(o.SeedEdges.Src), len(o.SeedEdges.Dst))}
	case o.NegRatio < 0 || o.NegRatio > MaxNegRatio:
		return &Error{Key: "neg_ratio", Msg: fmt.Sprintf("%d is out of range 0..%d", o.NegRatio, MaxNegRatio)}
	case o.SeedEdges == nil && (o.NegRatio != 0 || o.ExcludeSeedEdges):
		return &Error{Key: "neg_ratio", Msg: "neg_ratio and exclude_seed_edges need seed_edges (a link loader)"}
	case o.Split != "" && !contains(splits, o.Split):
		return &Error{Key: "split", Msg: fmt.Sprintf("%q is not one of train, val, test", o.Split)}
	case o.SeedIDs != nil && len(o.SeedIDs) == 0:
		return &Error{Key: "seed_ids", Msg: "empty"}
	case len(o.Fanouts) == 0:
		return &Error{Key: "fanouts", Msg: "missing: one fanout per hop, like [15, 10, 5]"}
	case len(o.Fanouts) > MaxHops:
		return &Error{Key: "fanouts", Msg: fmt.Sprintf("%d hops, at most %d", len(o.Fanouts), MaxHops)}
	}
	for i, f := range o.Fanouts {
		if f == 0 || f < -1 {
			return &Error{Key: "fanouts", Msg: fmt.Sprintf("fanouts[%d] = %d: each must be -1 (all) or positive", i, f)}
		}
		// The mesh carries a fanout as an int32: a larger one would be
		// cut on the hops sampled by a peer, and the batch differ from
		// one sampled on a single node.
		if f > math.MaxInt32 {
			return &Error{Key: "fanouts", Msg: fmt.Sprintf("fanouts[%d] = %d (hop %d) is over %d; -1 takes every neighbour", i, f, i+1, math.MaxInt32)}
		}
	}
	switch {
	case o.BatchSize < 1 || o.BatchSize > MaxBatchSize:
		return &Error{Key: "batch_size", Msg: fmt.Sprintf("%d is out of range 1..%d", o.BatchSize, MaxBatchSize)}
	case o.Epochs < 1 || o.Epochs > MaxEpochs:
		return &Error{Key: "epochs", Msg: fmt.Sprintf("%d is out of range 1..%d", o.Epochs, MaxEpochs)}
	case o.WorldSize < 1:
		return &Error{Key: "world_size", Msg: fmt.Sprintf("%d is not positive", o.WorldSize)}
	case o.Rank < 0 || o.Rank >= o.WorldSize:
		return &Error{Key: "rank", Msg: fmt.Sprintf("%d is out of range 0..%d (world_size %d)", o.Rank, o.WorldSize-1, o.WorldSize)}
	case o.Workers < 0 || o.Workers > MaxWorkers:
		return &Error{Key: "workers", Msg: fmt.Sprintf("%d is out of range 1..%d (0: the node's default)", o.Workers, MaxWorkers)}
	case o.Concurrency < 0 || o.Concurrency > MaxConcurrency:
		return &Error{Key: "concurrency", Msg: fmt.Sprintf("%d is out of range 1..%d (0: the node's default)", o.Concurrency, MaxConcurrency)}
	}
	if o.RingSize != "" {
		if n, err := shm.ParseSize(o.RingSize); err != nil || n <= 0 {
			return &Error{Key: "ring_size", Msg: fmt.Sprintf("%q is not a size like \"512MB\"", o.RingSize)}
		}
	}
	return nil
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}
