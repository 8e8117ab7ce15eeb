package kv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config builds a Store: the shard index this node serves and the tables.
type Config struct {
	Part   int    // shard index served here, in [0, P) of every table
	Tables []Spec // every table of the cluster, the same list on every node
	// SyncTimeout bounds a synchronous step from its first push;
	// 0 means DefaultSyncTimeout.
	SyncTimeout time.Duration
	// MaxBytes bounds the memory of this node's shards of all tables
	// together (ShardBytes); 0 means no bound. A table that would pass it
	// is refused, by New or Create, before anything is allocated: a row
	// count or dimension that is off by digits is then an error naming
	// the table, not an out-of-memory crash of the process that serves
	// every table.
	MaxBytes uint64
}

// Validate reports every problem of c.
func (c *Config) Validate() error {
	var errs []error
	seen := make(map[string]bool)
	for i := range c.Tables {
		s := &c.Tables[i]
		if err := s.Validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("kv: table %q: name: defined twice: %w", s.Name, ErrSpec))
		}
		seen[s.Name] = true
		if c.Part < 0 || c.Part >= s.Parts() {
			errs = append(errs, fmt.Errorf("kv: table %q: part %d outside its %d shards: %w", s.Name, c.Part, s.Parts(), ErrSpec))
		}
	}
	if c.SyncTimeout < 0 {
		errs = append(errs, fmt.Errorf("kv: sync_timeout %v: must be >= 0: %w", c.SyncTimeout, ErrSpec))
	}
	return errors.Join(errs...)
}

// Store is one node's shards of every table. All methods are safe for
// concurrent use; see doc.go for the ordering guarantees.
type Store struct {
	part        int
	set         atomic.Pointer[tableSet] // replaced whole by Create: read without a lock
	createMu    sync.Mutex               // serialises Create
	saveMu      sync.Mutex               // serialises Save, Load and Recover on the checkpoint dir
	syncTimeout time.Duration
	maxBytes    uint64    // Config.MaxBytes
	bytes       uint64    // ShardBytes of the tables held; under createMu after New
	scratch     sync.Pool // *scratch
	loadedMu    sync.Mutex
	loaded      map[string]Loaded // by table: the file it was loaded from (Loaded); under loadedMu
	// syncDir fsyncs the checkpoint directory when Save commits its
	// journal: the package's syncDir; tests make it fail.
	syncDir func(dir string) error
	// pullWaited, when set (tests only), runs in PullVersion after each
	// wait for the version and before the rows are read: where a Load
	// may change the version under the pull.
	pullWaited func(table string)
}

// tableSet is an immutable snapshot of a store's tables.
type tableSet struct {
	tables map[string]*table
	names  []string // sorted
}

// New allocates and initialises this node's shard of every table.
func New(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Store{part: cfg.Part, syncTimeout: cfg.SyncTimeout, maxBytes: cfg.MaxBytes, syncDir: syncDir, loaded: map[string]Loaded{}}
	if s.syncTimeout == 0 {
		s.syncTimeout = DefaultSyncTimeout
	}
	set := &tableSet{tables: make(map[string]*table)}
	for _, spec := range cfg.Tables {
		if err := s.reserve(&spec); err != nil {
			return nil, err
		}
	}
	for _, spec := range cfg.Tables {
		spec.Bounds = slices.Clone(spec.Bounds)
		t, err := newTable(spec, cfg.Part)
		if err != nil {
			return nil, err
		}
		set.tables[spec.Name] = t
		set.names = append(set.names, spec.Name)
	}
	slices.Sort(set.names)
	s.set.Store(set)
	s.scratch.New = func() any { return new(scratch) }
	return s, nil
}

// Part is the shard index this store serves.
func (s *Store) Part() int { return s.part }

// Tables lists the table names, sorted.
func (s *Store) Tables() []string { return slices.Clone(s.set.Load().names) }

// Create adds a table at run time (a trainer declares its dense
// parameters when it starts). A table of that name with an equal spec
// makes Create a no-op (true when it created the table); one with another
// spec is an ErrSpec error naming the first field that differs.
func (s *Store) Create(spec Spec) (bool, error) {
	if err := spec.Validate(); err != nil {
		return false, err
	}
	if s.part >= spec.Parts() {
		return false, fmt.Errorf("kv: table %q: part %d outside its %d shards: %w", spec.Name, s.part, spec.Parts(), ErrSpec)
	}
	s.createMu.Lock()
	defer s.createMu.Unlock()
	old := s.set.Load()
	if t, ok := old.tables[spec.Name]; ok {
		if diff := specDiff(&t.spec, &spec); diff != "" {
			return false, fmt.Errorf("kv: table %q: %s: %w", spec.Name, diff, ErrSpec)
		}
		return false, nil
	}
	if err := s.reserve(&spec); err != nil {
		return false, err
	}
	spec.Bounds = slices.Clone(spec.Bounds)
	t, err := newTable(spec, s.part)
	if err != nil {
		s.bytes -= spec.ShardBytes(s.part)
		return false, err
	}
	set := &tableSet{tables: make(map[string]*table, len(old.tables)+1), names: slices.Clone(old.names)}
	for k, v := range old.tables {
		set.tables[k] = v
	}
	set.tables[spec.Name] = t
	set.names = append(set.names, spec.Name)
	slices.Sort(set.names)
	s.set.Store(set)
	return true, nil
}

// Drop removes a table from this store (kv_drop) and reports whether it
// held it. Its shard no longer counts against MaxBytes, and a table of
// the same name may be created again with any spec. A synchronous step
// or a pull waiting for a version of it fails (ErrUnknownTable); pulls
// and pushes already under way finish on the dropped shard. Its
// checkpoint files stay where they are.
func (s *Store) Drop(name string) bool {
	s.createMu.Lock()
	defer s.createMu.Unlock()
	old := s.set.Load()
	t, ok := old.tables[name]
	if !ok {
		return false
	}
	set := &tableSet{tables: make(map[string]*table, len(old.tables)-1)}
	for k, v := range old.tables {
		if k != name {
			set.tables[k] = v
			set.names = append(set.names, k)
		}
	}
	slices.Sort(set.names)
	s.set.Store(set)
	s.bytes -= t.spec.ShardBytes(s.part)
	s.loadedMu.Lock()
	delete(s.loaded, name)
	s.loadedMu.Unlock()
	if t.sync != nil {
		t.drop()
	}
	return true
}

// reserve counts spec's shard against MaxBytes, or refuses it. New
// calls it alone; Create with createMu held.
func (s *Store) reserve(spec *Spec) error {
	need := spec.ShardBytes(s.part)
	if s.maxBytes > 0 && (need > s.maxBytes || s.bytes > s.maxBytes-need) {
		lo, hi := spec.Range(s.part)
		return fmt.Errorf("kv: table %q: part %d: %d rows × %d (%s) need %s, with the %s of the tables held more than this node's limit of %s: %w",
			spec.Name, s.part, hi-lo, spec.Dim, spec.Opt.Kind, byteSize(need), byteSize(s.bytes), byteSize(s.maxBytes), ErrSpec)
	}
	s.bytes += need
	return nil
}

// byteSize prints n bytes with a binary unit.
func byteSize(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// specDiff names every field of spec b that differs from the existing
// table's spec a, with both values ("dim 8 differs from the existing
// table's 4, optimiser {…} differs from the existing table's {…}"), or
// is "" when they are equal. Every field, not the first: a caller that
// replaces a table of its own only when the rows alone differ (node
// train --save, whose parameter table is as long as the model) must
// not take a table of another kind for one of its own.
func specDiff(a, b *Spec) string {
	var d []string
	diff := func(field string, asked, have any) {
		d = append(d, fmt.Sprintf("%s %v"+specDiffText+"%v", field, asked, have))
	}
	if a.Rows != b.Rows {
		diff("rows", b.Rows, a.Rows)
	}
	if a.Dim != b.Dim {
		diff("dim", b.Dim, a.Dim)
	}
	if a.Init != b.Init {
		diff("init", b.Init, a.Init)
	}
	if a.Opt != b.Opt {
		diff("optimiser", b.Opt, a.Opt)
	}
	if a.Mode != b.Mode {
		diff("mode", b.Mode, a.Mode)
	}
	if !slices.Equal(a.Bounds, b.Bounds) {
		diff("bounds", b.Bounds, a.Bounds)
	}
	return strings.Join(d, ", ")
}

// specDiffText joins the field and value a create asked for to the
// existing table's value in specDiff's message.
const specDiffText = " differs from the existing table's "

// specFields are the fields specDiff names, in its order.
var specFields = []string{"rows", "dim", "init", "optimiser", "mode", "bounds"}

// SpecFields are the fields a spec clash names: Create's ErrSpec error,
// as specDiff words it ("kv: table "t": dim 4 differs from the existing
// table's 3"), also when it reached a trainer as the text of a node's
// error, or as a shard's answer (a RemoteError: its own words). They are
// some of "rows", "dim", "init", "optimiser", "mode" and "bounds", in
// that order, and none for any other error, so that a caller tells a
// table of another shape from one of other hyper-parameters (or from
// another ErrSpec, such as kv.max_memory's) without matching text of its
// own.
func SpecFields(err error) []string {
	if !errors.Is(err, ErrSpec) {
		return nil
	}
	text := err.Error()
	if r, ok := errors.AsType[*RemoteError](err); ok {
		text = r.Text // "kv: part 1: table …" drops the "kv: " the parse starts from
	}
	_, rest, ok := strings.Cut(text, `kv: table "`)
	if !ok {
		return nil
	}
	if _, rest, ok = strings.Cut(rest, `": `); !ok {
		return nil
	}
	// "rows 8" + text + "4, dim 3" + text + "2: invalid table spec":
	// the first field opens the first segment, the others follow the
	// last ", " of theirs.
	seg := strings.Split(rest, specDiffText)
	var fields []string
	for i, s := range seg[:len(seg)-1] {
		if i > 0 {
			k := strings.LastIndex(s, ", ")
			if k < 0 {
				return nil
			}
			s = s[k+2:]
		}
		f, _, _ := strings.Cut(s, " ")
		if !slices.Contains(specFields, f) {
			return nil
		}
		fields = append(fields, f)
	}
	return fields
}

// Spec is the spec of a table.
func (s *Store) Spec(table string) (Spec, error) {
	t, err := s.table(table)
	if err != nil {
		return Spec{}, err
	}
	sp := t.spec
	sp.Bounds = slices.Clone(sp.Bounds)
	return sp, nil
}

// Version is the table's version: synchronous steps applied (Sync) or
// pushes applied (Async) on this shard.
func (s *Store) Version(table string) (uint64, error) {
	t, err := s.table(table)
	if err != nil {
		return 0, err
	}
	return t.version.Load(), nil
}

func (s *Store) table(name string) (*table, error) {
	t, ok := s.set.Load().tables[name]
	if !ok {
		return nil, fmt.Errorf("kv: table %q: %w", name, ErrUnknownTable)
	}
	return t, nil
}

// Pull appends the rows of ids (global ids this shard owns) to dst, row
// after row, and returns the extended slice.
func (s *Store) Pull(table string, ids []uint64, dst []float32) ([]float32, error) {
	dst, _, err := s.PullVersion(context.Background(), table, 0, ids, dst)
	return dst, err
}

// PullVersion is Pull that first waits until a Sync table's version is at
// least minVersion; it returns the version the rows belong to, never one
// below minVersion. On an Async table minVersion must be 0.
func (s *Store) PullVersion(ctx context.Context, table string, minVersion uint64, ids []uint64, dst []float32) ([]float32, uint64, error) {
	t, err := s.table(table)
	if err != nil {
		return dst, 0, err
	}
	if minVersion > 0 && t.sync == nil {
		return dst, 0, fmt.Errorf("kv: table %q: waiting for version %d on an async table: %w", table, minVersion, ErrMode)
	}
	for {
		if minVersion > 0 {
			if err := t.waitVersion(ctx, minVersion); err != nil {
				return dst, 0, err
			}
			if s.pullWaited != nil {
				s.pullWaited(table)
			}
		}
		// A Sync table's version changes only under t.mu held exclusively
		// (a step, Load), so the version read here is the rows' version.
		// The wait cannot hold t.mu: the step it waits for needs it. A
		// Load between the wait and this lock may have set the version
		// back below minVersion; the pull then waits again, as one that
		// started after the Load does.
		t.mu.RLock()
		v := t.version.Load()
		if v >= minVersion {
			dst, err = t.pull(ids, dst)
			t.mu.RUnlock()
			return dst, v, err
		}
		t.mu.RUnlock()
	}
}

// Push applies the gradients grads (len(ids)·dim, row after row) of an
// Async table with its optimiser. Duplicate ids are summed first. Either
// every row is updated or, on error, none.
func (s *Store) Push(table string, ids []uint64, grads []float32) error {
	t, err := s.table(table)
	if err != nil {
		return err
	}
	if t.sync != nil {
		return fmt.Errorf("kv: table %q: push to a sync table, use PushSync: %w", table, ErrMode)
	}
	sc := s.scratch.Get().(*scratch)
	t.mu.RLock()
	err = t.push(ids, grads, sc)
	t.mu.RUnlock()
	s.scratch.Put(sc)
	return err
}

// PushSync contributes trainer's gradient for every row of this shard
// (rows·dim values, in row order) to step of a Sync table, and blocks until
// all world trainers of the step have pushed and the averaged update is
// applied (nil), or the step fails for everyone (ErrStepFailed, naming the
// missing trainers): a trainer Left, a caller's ctx ended, or SyncTimeout
// passed since the step's first push. step must equal the shard's version.
// grads is read until PushSync returns and is never written.
func (s *Store) PushSync(ctx context.Context, table string, step uint64, trainer, world int, grads []float32) error {
	t, err := s.table(table)
	if err != nil {
		return err
	}
	if t.sync == nil {
		return fmt.Errorf("kv: table %q: sync push to an async table, use Push: %w", table, ErrMode)
	}
	return t.pushSync(ctx, step, trainer, world, grads, s.syncTimeout)
}

// Leave tells every Sync table that trainer is gone (its connection
// dropped): a step it belongs to fails at once for the other trainers,
// and later steps that wait for it fail until a departed trainer pushes
// again (see doc.go).
func (s *Store) Leave(trainer int) {
	set := s.set.Load()
	for _, name := range set.names {
		if t := set.tables[name]; t.sync != nil {
			t.leave(trainer)
		}
	}
}

// LeaveTable is Leave for the Sync table named table alone: the trainer
// of one job leaves its own table, not the tables of other jobs whose
// ranks have the same numbers. A table this store does not hold, or an
// Async one, has no step to fail.
func (s *Store) LeaveTable(table string, trainer int) {
	if t := s.set.Load().tables[table]; t != nil && t.sync != nil {
		t.leave(trainer)
	}
}
