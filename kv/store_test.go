package kv

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSpecValidateReportsEveryField(t *testing.T) {
	s := Spec{Name: "bad/name", Rows: 0, Dim: 0, Init: Init{Kind: 9}, Opt: Optimizer{Kind: OptAdagrad}, Mode: 7, Bounds: []uint64{1}}
	err := s.Validate()
	if !errors.Is(err, ErrSpec) {
		t.Fatalf("err %v, want ErrSpec", err)
	}
	for _, field := range []string{"name", "rows", "dim", "init.kind", "opt.eps", "mode", "bounds"} {
		if !strings.Contains(err.Error(), field+":") {
			t.Errorf("error does not name field %s:\n%v", field, err)
		}
	}
	for _, o := range []Optimizer{SGD(-0.1), Adagrad(-0.1, 1e-10), Adam(-0.1, 0.9, 0.999, 1e-8)} {
		neg := spec("neg", 4, 2, o, Async, 1)
		if err := neg.Validate(); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "opt.lr: -0.1: must be >= 0") {
			t.Errorf("%s with lr -0.1: %v, want refused", o.Kind, err)
		}
	}
	good := spec("ent", 10, 4, Adagrad(0.1, 1e-10), Async, 3)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{Part: 3, Tables: []Spec{good, good}})
	if err == nil || !strings.Contains(err.Error(), "defined twice") || !strings.Contains(err.Error(), "part 3 outside") {
		t.Fatalf("New: %v", err)
	}
}

func TestEvenBounds(t *testing.T) {
	cases := []struct {
		rows  uint64
		parts int
		want  []uint64
	}{
		{10, 3, []uint64{0, 4, 7, 10}},
		{2, 4, []uint64{0, 1, 2, 2, 2}},
		{8, 1, []uint64{0, 8}},
	}
	for _, c := range cases {
		if got := EvenBounds(c.rows, c.parts); !slices.Equal(got, c.want) {
			t.Errorf("EvenBounds(%d, %d) = %v, want %v", c.rows, c.parts, got, c.want)
		}
	}
	s := spec("e", 10, 1, SGD(1), Async, 3)
	for id, want := range []int{0, 0, 0, 0, 1, 1, 1, 2, 2, 2, -1} {
		if got := s.Owner(uint64(id)); got != want {
			t.Errorf("Owner(%d) = %d, want %d", id, got, want)
		}
	}
}

func TestPullAppendsToCallerBuffer(t *testing.T) {
	s := newStore(t, 1, spec("e", 6, 2, SGD(1), Async, 2)) // owns rows 3..5
	if err := s.Push("e", []uint64{4, 5}, f32(1, 2, 3, 4)); err != nil {
		t.Fatal(err)
	}
	dst := f32(9)
	got, err := s.Pull("e", []uint64{5, 3, 4}, dst)
	if err != nil {
		t.Fatal(err)
	}
	if want := f32(9, -3, -4, 0, 0, -1, -2); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestPushErrorsApplyNothing(t *testing.T) {
	s := newStore(t, 0, spec("e", 6, 2, SGD(1), Async, 2), spec("w", 4, 2, SGD(1), Sync, 1))
	cases := []struct {
		name  string
		table string
		ids   []uint64
		grads []float32
		want  error
	}{
		{"foreign id", "e", []uint64{0, 3}, f32(1, 1, 1, 1), ErrNotOwner},
		{"short grads", "e", []uint64{0, 1}, f32(1, 1, 1), ErrShape},
		{"unknown table", "x", []uint64{0}, f32(1, 1), ErrUnknownTable},
		{"sync table", "w", []uint64{0}, f32(1, 1), ErrMode},
		{"nan gradient", "e", []uint64{0, 2}, f32(1, 1, 1, float32(math.NaN())), ErrNonFinite},
		{"inf gradient", "e", []uint64{1}, f32(float32(math.Inf(-1)), 1), ErrNonFinite},
	}
	for _, c := range cases {
		err := s.Push(c.table, c.ids, c.grads)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
	// The error names the row and the value, and crosses the wire.
	err := s.Push("e", []uint64{0, 2}, f32(1, 1, 1, float32(math.NaN())))
	if want := `kv: table "e": gradient of id 2 is NaN at column 1`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("err %v, want it to start %q", err, want)
	}
	if re := (&RemoteError{Code: NewErrorMsg(err).Code}); !errors.Is(re, ErrNonFinite) {
		t.Errorf("code %d does not carry ErrNonFinite", re.Code)
	}
	got, _ := s.Pull("e", []uint64{0, 1, 2}, nil)
	if !slices.Equal(got, make([]float32, 6)) {
		t.Fatalf("a failed push changed rows: %v", got)
	}
	if v, _ := s.Version("e"); v != 0 {
		t.Fatalf("version %d after failed pushes", v)
	}
	// A push of no rows changes nothing, the version included.
	if err := s.Push("e", nil, nil); err != nil {
		t.Fatalf("empty push: %v", err)
	}
	if v, _ := s.Version("e"); v != 0 {
		t.Fatalf("version %d after an empty push, want 0", v)
	}
}

// TestDuplicateIDsAccumulate: a row twice in one push gets one update with
// the summed gradient, which for Adagrad differs from two updates.
func TestDuplicateIDsAccumulate(t *testing.T) {
	opt := Adagrad(0.5, 1e-10)
	dup := newStore(t, 0, spec("e", 4, 2, opt, Async, 1))
	once := newStore(t, 0, spec("e", 4, 2, opt, Async, 1))
	twice := newStore(t, 0, spec("e", 4, 2, opt, Async, 1))
	if err := dup.Push("e", []uint64{2, 0, 2, 2}, f32(1, 2, 5, 5, 3, -1, 0.5, 0.25)); err != nil {
		t.Fatal(err)
	}
	// Row 2: 1+3+0.5, 2-1+0.25 summed in order of appearance.
	if err := once.Push("e", []uint64{0, 2}, f32(5, 5, 4.5, 1.25)); err != nil {
		t.Fatal(err)
	}
	for _, p := range [][]float32{{1, 2}, {3, -1}, {0.5, 0.25}} {
		if err := twice.Push("e", []uint64{2}, p); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := dup.Pull("e", allIDs(4), nil)
	b, _ := once.Pull("e", allIDs(4), nil)
	c, _ := twice.Pull("e", allIDs(4), nil)
	if !slices.Equal(a, b) {
		t.Fatalf("duplicate push %v, want summed push %v", a, b)
	}
	if slices.Equal(a[4:6], c[4:6]) {
		t.Fatalf("duplicate push equals three separate pushes %v: not accumulated", c[4:6])
	}
	if a[0] != -0.5 || a[1] != -0.5 { // row 0: std = sqrt(25)=5, 0.5·5/5
		t.Fatalf("row 0 = %v, want [-0.5 -0.5]", a[:2])
	}
}

// TestConcurrentPushes: trainers pushing at once, on overlapping rows,
// lose no update (SGD sums commute; the values are exact in float32).
func TestConcurrentPushes(t *testing.T) {
	const rows, dim, trainers, pushes = 512, 4, 8, 50
	s := newStore(t, 0, spec("e", rows, dim, SGD(1), Async, 1))
	var wg sync.WaitGroup
	for k := range trainers {
		wg.Go(func() {
			ids := make([]uint64, 64)
			grads := make([]float32, 64*dim)
			for i := range pushes {
				for j := range ids {
					ids[j] = uint64((k*7 + i*64 + j) % rows)
				}
				for j := range grads {
					grads[j] = float32(k + 1)
				}
				if err := s.Push("e", ids, grads); err != nil {
					t.Error(err)
					return
				}
				if _, err := s.Pull("e", ids[:8], nil); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	want := make([]float32, rows*dim)
	for k := range trainers {
		for i := range pushes {
			for j := range 64 {
				r := (k*7 + i*64 + j) % rows
				for d := range dim {
					want[r*dim+d] -= float32(k + 1)
				}
			}
		}
	}
	got, _ := s.Pull("e", allIDs(rows), nil)
	if !slices.Equal(got, want) {
		t.Fatal("concurrent pushes lost or duplicated an update")
	}
	if v, _ := s.Version("e"); v != trainers*pushes {
		t.Fatalf("version %d, want %d", v, trainers*pushes)
	}
}

// TestSpecFields: the fields of a clash, every one that differs, come
// back from Create's error and from its text as a node passes it on (a
// wrapped message, the sentinel from the wire code); other errors name
// none.
func TestSpecFields(t *testing.T) {
	spec := Spec{Name: "t.x-1", Rows: 4, Dim: 2, Init: Init{Kind: InitUniform, Scale: 0.1, Seed: 1},
		Opt: Adagrad(0.1, 1e-10), Mode: Async, Bounds: []uint64{0, 4}}
	s, err := New(Config{Tables: []Spec{spec}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		fields []string
		change func(*Spec)
	}{
		{[]string{"rows", "bounds"}, func(s *Spec) { s.Rows, s.Bounds = 8, []uint64{0, 8} }},
		{[]string{"dim"}, func(s *Spec) { s.Dim = 3 }},
		{[]string{"init"}, func(s *Spec) { s.Init.Seed = 2 }},
		{[]string{"optimiser"}, func(s *Spec) { s.Opt = Adagrad(0.2, 1e-10) }},
		{[]string{"init", "optimiser"}, func(s *Spec) { s.Init.Scale, s.Opt = 0.2, Adagrad(0.2, 1e-10) }},
		{[]string{"mode"}, func(s *Spec) { s.Mode = Sync }},
		{[]string{"bounds"}, func(s *Spec) { s.Bounds = []uint64{0, 2, 4} }},
		// What node train --save's parameter table looks like beside it.
		{[]string{"rows", "dim", "init", "optimiser", "mode", "bounds"}, func(s *Spec) {
			*s = Spec{Name: s.Name, Rows: 41, Dim: 256, Opt: Average(), Mode: Sync, Bounds: []uint64{0, 41}}
		}},
	} {
		other := spec
		c.change(&other)
		_, err := s.Create(other)
		if got := SpecFields(err); !slices.Equal(got, c.fields) {
			t.Errorf("%v: %v: fields %q", c.fields, err, got)
		}
		// A shard's answer to a peer, as the node receives it.
		var msg ErrorMsg
		if derr := DecodeErrorMsg(AppendErrorMsg(nil, NewErrorMsg(err)), &msg); derr != nil {
			t.Fatal(derr)
		}
		remote := fmt.Errorf("part 1: %w", &RemoteError{Part: 1, Code: msg.Code, Text: msg.Text})
		if got := SpecFields(remote); !slices.Equal(got, c.fields) {
			t.Errorf("%v as a shard's answer: %v: fields %q", c.fields, remote, got)
		}
		passed := fmt.Errorf("client: kv_create: %s: %w", err.Error(), ErrSpec)
		if got := SpecFields(passed); !slices.Equal(got, c.fields) {
			t.Errorf("%v passed on: %v: fields %q", c.fields, passed, got)
		}
		if got := SpecFields(errors.New(err.Error())); got != nil {
			t.Errorf("%v without ErrSpec: fields %q", c.fields, got)
		}
	}
	// The values as a spec words them: "{Kind:adagrad LR:0.2 Eps:1e-10 Beta1:0 Beta2:0}" before.
	other := spec
	other.Init.Scale, other.Opt = 0.2, Adam(0.2, 0.9, 0.999, 1e-8)
	_, err = s.Create(other)
	if want := "init uniform scale 0.2 seed 1 differs from the existing table's uniform scale 0.1 seed 1, " +
		"optimiser adam lr 0.2 eps 1e-08 beta1 0.9 beta2 0.999 differs from the existing table's adagrad lr 0.1 eps 1e-10"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("clash of init and optimiser: %v\nwant it to say %q", err, want)
	}
	for _, err := range []error{nil, ErrSpec, fmt.Errorf("kv: table %q: part 3 outside its 2 shards: %w", "t", ErrSpec),
		fmt.Errorf("kv: table %q: colour red differs from the existing table's blue: %w", "t", ErrSpec),
		fmt.Errorf("kv: table %q: dim 3 differs from the existing table's 2 and colour red differs from the existing table's blue: %w", "t", ErrSpec),
		// A shard's kv.max_memory refusal is an ErrSpec, not a clash.
		&RemoteError{Part: 1, Code: ErrorCode(ErrSpec), Text: `kv: table "t": 80 bytes more than kv.max_memory allows: invalid table spec`}} {
		if got := SpecFields(err); got != nil {
			t.Errorf("%v: fields %q, want none", err, got)
		}
	}
}

func TestStoreCreate(t *testing.T) {
	s, err := New(Config{Part: 1})
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Name: "grad", Rows: 5, Dim: 2, Opt: Average(), Mode: Sync, Bounds: EvenBounds(5, 2)}
	for i, want := range []bool{true, false} {
		created, err := s.Create(spec)
		if err != nil || created != want {
			t.Fatalf("create %d: created %v, err %v; want %v, nil", i, created, err, want)
		}
	}
	other := spec
	other.Dim = 3
	if _, err := s.Create(other); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "dim 3 differs from the existing table's 2") {
		t.Fatalf("create with another dim: %v, want ErrSpec naming dim", err)
	}
	async := spec
	async.Name, async.Mode = "bad", Async
	if _, err := s.Create(async); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "average needs mode sync") {
		t.Fatalf("average on an async table: %v", err)
	}
	if got := s.Tables(); len(got) != 1 || got[0] != "grad" {
		t.Fatalf("tables %v, want [grad]", got)
	}
	// Shard 1 of EvenBounds(5, 2) holds rows 3 and 4: the step's average
	// replaces them.
	g0 := []float32{1, 2, 3, 4}
	g1 := []float32{3, 2, 1, 0}
	errs := make(chan error, 2)
	go func() { errs <- s.PushSync(context.Background(), "grad", 0, 0, 2, g0) }()
	go func() { errs <- s.PushSync(context.Background(), "grad", 0, 1, 2, g1) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Pull("grad", []uint64{3, 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float32{2, 2, 2, 2}; !slices.Equal(got, want) {
		t.Fatalf("rows after step %v, want %v", got, want)
	}
	dir := t.TempDir()
	if err := s.Save(dir); err != nil {
		t.Fatal(err)
	}
	s2, _ := New(Config{Part: 1})
	if _, err := s2.Create(spec); err != nil {
		t.Fatal(err)
	}
	if err := s2.LoadTable(dir, "grad"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s2.Pull("grad", []uint64{3, 4}, nil); !slices.Equal(got, []float32{2, 2, 2, 2}) {
		t.Fatalf("rows after load %v", got)
	}
	if v, _ := s2.Version("grad"); v != 1 {
		t.Fatalf("version after load %d, want 1", v)
	}
}

// TestStoreMaxBytes: tables are counted against MaxBytes before they are
// allocated; one that would pass it is refused by New or Create with an
// ErrSpec error that names it, and the store keeps what it held.
func TestStoreMaxBytes(t *testing.T) {
	sgd := spec("sgd", 100, 4, SGD(0.1), Async, 2)           // part 0: 50 rows × 16 B = 800 B
	ada := spec("ada", 100, 4, Adagrad(0.1, 1e-8), Async, 2) // 50 × 20 B = 1000 B
	adam := spec("adam", 100, 4, Adam(0.1, 0.9, 0.999, 1e-8), Async, 2)
	for _, c := range []struct {
		s    Spec
		want uint64
	}{{sgd, 800}, {ada, 1000}, {adam, 50 * (16 + 32 + 4)}} {
		if got := c.s.ShardBytes(0); got != c.want {
			t.Errorf("%s: ShardBytes = %d, want %d", c.s.Name, got, c.want)
		}
	}
	huge := spec("huge", 1<<62, 1<<20, Adam(0.1, 0.9, 0.999, 1e-8), Async, 1)
	if got := huge.ShardBytes(0); got != math.MaxUint64 {
		t.Errorf("huge: ShardBytes = %d, want saturated", got)
	}

	if _, err := New(Config{Part: 0, Tables: []Spec{sgd, ada}, MaxBytes: 1799}); !errors.Is(err, ErrSpec) ||
		!strings.Contains(err.Error(), `kv: table "ada": part 0: 50 rows × 4 (adagrad) need 1000 B, with the 800 B of the tables held more than this node's limit of 1.8 KiB`) {
		t.Fatalf("New over the limit: %v", err)
	}
	s, err := New(Config{Part: 0, Tables: []Spec{sgd, ada}, MaxBytes: 4000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(adam); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), `table "adam"`) {
		t.Fatalf("Create over the limit: %v", err)
	}
	if _, err := s.Create(huge); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "limit of 3.9 KiB") {
		t.Fatalf("Create of an impossible table: %v", err)
	}
	if got := s.Tables(); !slices.Equal(got, []string{"ada", "sgd"}) {
		t.Fatalf("tables after refusals: %v", got)
	}
	small := spec("small", 100, 4, SGD(0.1), Async, 2)
	if created, err := s.Create(small); !created || err != nil {
		t.Fatalf("Create within the limit: %v %v", created, err)
	}
	if _, err := New(Config{Part: 0, Tables: []Spec{huge}}); err == nil || errors.Is(err, ErrSpec) && strings.Contains(err.Error(), "limit") {
		t.Fatalf("without MaxBytes the limit must not apply (the shard check still refuses): %v", err)
	}
}

// TestStoreDrop: a dropped table is gone (ErrUnknownTable), frees its
// share of MaxBytes, may come back with another spec, and fails a
// synchronous step and a version wait that were waiting on it.
func TestStoreDrop(t *testing.T) {
	emb := spec("emb", 100, 4, SGD(0.1), Async, 1) // 1600 B
	grad := Spec{Name: "grad", Rows: 2, Dim: 2, Opt: Average(), Mode: Sync, Bounds: EvenBounds(2, 1)}
	s, err := New(Config{Part: 0, Tables: []Spec{emb, grad}, MaxBytes: 2500})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stepErr := make(chan error, 1)
	go func() { stepErr <- s.PushSync(ctx, "grad", 0, 0, 2, []float32{1, 2, 3, 4}) }() // trainer 1 never comes
	waitErr := make(chan error, 1)
	go func() {
		_, _, err := s.PullVersion(ctx, "grad", 1, []uint64{0}, nil)
		waitErr <- err
	}()
	bigger := spec("emb2", 100, 4, SGD(0.1), Async, 1)
	if _, err := s.Create(bigger); !errors.Is(err, ErrSpec) {
		t.Fatalf("create past MaxBytes before the drop: %v", err)
	}
	if !s.Drop("emb") || s.Drop("emb") {
		t.Fatal("Drop: want true once, then false")
	}
	if _, err := s.Pull("emb", []uint64{0}, nil); !errors.Is(err, ErrUnknownTable) {
		t.Fatalf("pull after the drop: %v", err)
	}
	if created, err := s.Create(bigger); err != nil || !created {
		t.Fatalf("create after the drop freed 1600 B: %v, %v", created, err)
	}
	other := emb
	other.Dim = 2 // another spec under the dropped name
	if created, err := s.Create(other); err != nil || !created {
		t.Fatalf("re-create emb with dim 2: %v, %v", created, err)
	}
	// Let the step and the wait start before grad goes.
	for {
		s.set.Load().tables["grad"].sync.mu.Lock()
		started := s.set.Load().tables["grad"].sync.mu.round != nil
		s.set.Load().tables["grad"].sync.mu.Unlock()
		if started {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if !s.Drop("grad") {
		t.Fatal("Drop grad: false")
	}
	for name, ch := range map[string]chan error{"step": stepErr, "version wait": waitErr} {
		select {
		case err := <-ch:
			// The wait may start after the drop: then it finds no table.
			if !errors.Is(err, ErrUnknownTable) || !strings.Contains(err.Error(), `"grad"`) {
				t.Errorf("%s on the dropped table: %v", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s still waiting after the drop", name)
		}
	}
	if got := s.Tables(); !slices.Equal(got, []string{"emb", "emb2"}) {
		t.Errorf("tables %v, want [emb emb2]", got)
	}
}

// TestAllFinite: every position (the four sums and the tail) and every
// kind of non-finite value is seen; the extremes of float32 are finite.
func TestAllFinite(t *testing.T) {
	if !allFinite(nil) || !allFinite(f32(math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, float32(math.Copysign(0, -1)), 1, 2, 3)) {
		t.Fatal("finite values reported non-finite")
	}
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		for n := 1; n <= 9; n++ {
			for at := range n {
				g := make([]float32, n)
				g[at] = bad
				if allFinite(g) {
					t.Fatalf("%v at %d of %d not seen", bad, at, n)
				}
			}
		}
	}
}
