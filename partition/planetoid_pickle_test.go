package partition

import (
	"encoding/binary"

	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// pkw writes pickles as Python 2's pickle.dump(obj, f, 2) lays out the
// Planetoid files: globals memoised and fetched again with BINGET, ints
// in the narrowest opcode, SETITEMS and APPENDS in batches of 1000 with
// a lone item as SETITEM or APPEND.
type pkw struct {
	b       []byte
	memo    uint32
	globals map[string]uint32
}

func newPkw() *pkw { return &pkw{b: []byte{pkProto, 2}, globals: map[string]uint32{}} }

func (w *pkw) op(b ...byte) *pkw { w.b = append(w.b, b...); return w }

func (w *pkw) put() *pkw {
	w.memo++
	if w.memo < 256 {
		return w.op(pkBinput, byte(w.memo))
	}
	return w.op(pkLongBinput).op(binary.LittleEndian.AppendUint32(nil, w.memo)...)
}

func (w *pkw) global(g string) *pkw {
	if i, ok := w.globals[g]; ok {
		if i < 256 {
			return w.op(pkBinget, byte(i))
		}
		return w.op(pkLongBinget).op(binary.LittleEndian.AppendUint32(nil, i)...)
	}
	mod, name, _ := strings.Cut(g, " ")
	w.op(pkGlobal).op([]byte(mod + "\n" + name + "\n")...).put()
	w.globals[g] = w.memo
	return w
}

func (w *pkw) int(v int) *pkw {
	switch {
	case v >= 0 && v < 256:
		return w.op(pkBinint1, byte(v))
	case v >= 0 && v < 65536:
		return w.op(pkBinint2, byte(v), byte(v>>8))
	}
	return w.op(pkBinint).op(binary.LittleEndian.AppendUint32(nil, uint32(int32(v)))...)
}

func (w *pkw) str(s []byte) *pkw {
	if len(s) < 256 {
		return w.op(pkShortBinstring, byte(len(s))).op(s...)
	}
	return w.op(pkBinstring).op(binary.LittleEndian.AppendUint32(nil, uint32(len(s)))...).op(s...)
}

func (w *pkw) tuple(n int, item func(int)) *pkw {
	if n == 0 {
		return w.op(pkEmptyTuple)
	}
	if n > 3 {
		w.op(pkMark)
	}
	for i := range n {
		item(i)
	}
	if n > 3 {
		return w.op(pkTuple)
	}
	return w.op(pkTuple1 + byte(n-1))
}

// ndarray writes numpy's reduction of a C-ordered array of dtype
// ("i4", "f4") with raw little-endian bytes.
func (w *pkw) ndarray(shape []int, dtype string, raw []byte) *pkw {
	w.global(pyReconstruct).global(pyNDArray).int(0).op(pkTuple1).str([]byte("b")).op(pkTuple3, pkReduce).put()
	w.op(pkMark).int(1).tuple(len(shape), func(i int) { w.int(shape[i]) })
	w.global(pyDtype).str([]byte(dtype)).int(0).int(1).op(pkTuple3, pkReduce).put()
	w.op(pkMark).int(3).str([]byte("<")).op(pkNone, pkNone, pkNone).int(-1).int(-1).int(0).op(pkTuple, pkBuild)
	return w.op(pkNewFalse).str(raw).op(pkTuple, pkBuild)
}

func i32Bytes(v []int32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return b
}

func f32Bytes(v []float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// pickleCSRBytes is the pickle of a csr_matrix.
func pickleCSRBytes(m *csrMatrix) []byte {
	w := newPkw()
	w.global(pyCSR).op(pkEmptyTuple, pkNewobj).put().op(pkEmptyDict).put().op(pkMark)
	w.str([]byte("format")).str([]byte("csr"))
	w.str([]byte("_shape")).tuple(2, func(i int) { w.int([]int{m.rows, m.cols}[i]) })
	w.str([]byte("indptr")).ndarray([]int{len(m.indptr)}, "i4", i32Bytes(m.indptr))
	w.str([]byte("_cs_matrix__has_sorted_indices")).op(pkNewTrue)
	w.str([]byte("indices")).ndarray([]int{len(m.indices)}, "i4", i32Bytes(m.indices))
	w.str([]byte("maxprint")).int(50)
	w.str([]byte("data")).ndarray([]int{len(m.data)}, "f4", f32Bytes(m.data))
	return w.op(pkSetitems, pkBuild, pkStop).b
}

// pickleDenseCSR is the csr_matrix pickle of dense rows (zeros left out).
func pickleDenseCSR(rows [][]float32, cols int) []byte {
	m := &csrMatrix{rows: len(rows), cols: cols, indptr: []int32{0}}
	for _, r := range rows {
		for c, v := range r {
			if v != 0 {
				m.indices = append(m.indices, int32(c))
				m.data = append(m.data, v)
			}
		}
		m.indptr = append(m.indptr, int32(len(m.indices)))
	}
	return pickleCSRBytes(m)
}

// pickleOneHot is the pickle of an int32 array of one-hot rows of c
// columns; class -1 is a row of zeros.
func pickleOneHot(classes []int, c int) []byte {
	v := make([]int32, len(classes)*c)
	for i, k := range classes {
		if k >= 0 {
			v[i*c+k] = 1
		}
	}
	return newPkw().ndarray([]int{len(classes), c}, "i4", i32Bytes(v)).op(pkStop).b
}

// pickleGraph is the pickle of a defaultdict(list) with these keys, in
// this order, and neighbour lists.
func pickleGraph(keys []int, adj map[int][]int) []byte {
	w := newPkw()
	w.global(pyDefaultDict).global(pyList).op(pkTuple1, pkReduce).put()
	for start := 0; start < len(keys); start += 1000 {
		batch := keys[start:min(start+1000, len(keys))]
		if len(batch) > 1 {
			w.op(pkMark)
		}
		for _, k := range batch {
			w.int(k).op(pkEmptyList).put()
			switch l := adj[k]; {
			case len(l) == 1:
				w.int(l[0]).op(pkAppend)
			case len(l) > 1:
				w.op(pkMark)
				for _, v := range l {
					w.int(v)
				}
				w.op(pkAppends)
			}
		}
		if len(batch) > 1 {
			w.op(pkSetitems)
		} else {
			w.op(pkSetitem)
		}
	}
	return w.op(pkStop).b
}

func TestPickleRoundTrip(t *testing.T) {
	m := &csrMatrix{rows: 3, cols: 4, indptr: []int32{0, 2, 2, 3}, indices: []int32{0, 3, 1}, data: []float32{1, 0.25, -2}}
	v, err := unpickle(pickleCSRBytes(m))
	if err != nil {
		t.Fatal(err)
	}
	got, err := pickleCSR(v)
	if err != nil {
		t.Fatal(err)
	}
	rdEq(t, "csr", got, m)

	v, err = unpickle(pickleOneHot([]int{2, -1, 0}, 3))
	if err != nil {
		t.Fatal(err)
	}
	a, err := pickleNDArray(v)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := a.ints(2)
	rdEq(t, "one-hot err", err, nil)
	rdEq(t, "one-hot shape", a.shape, []int{3, 3})
	rdEq(t, "one-hot", vals, []int32{0, 0, 1, 0, 0, 0, 1, 0, 0})

	// 1001 keys: a batch of 1000 (SETITEMS) and one lone SETITEM; more
	// than 255 memo entries (LONG_BINPUT).
	keys := make([]int, 1001)
	adj := map[int][]int{}
	for i := range keys {
		keys[i] = i
		adj[i] = []int{(i + 1) % 1001}
	}
	adj[5] = []int{7, 7, 70000}
	v, err = unpickle(pickleGraph(keys, adj))
	if err != nil {
		t.Fatal(err)
	}
	src, dst, ks, err := pickleAdjacency(v)
	if err != nil {
		t.Fatal(err)
	}
	rdEq(t, "pairs", len(src), 1003)
	rdEq(t, "keys", len(ks), 1001)
	rdEq(t, "key 5", [][]uint32{src[5:8], dst[5:8]}, [][]uint32{{5, 5, 5}, {7, 7, 70000}})
	rdEq(t, "last", [2]uint32{src[1002], dst[1002]}, [2]uint32{1000, 0})
}

// TestUnpickleErrors: every malformed pickle is an error that says what
// is wrong and where, never a panic or an allocation of what it states.
func TestUnpickleErrors(t *testing.T) {
	good := pickleOneHot([]int{1}, 2)
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "pickle offset 0: truncated: no STOP"},
		{"protocol 3", []byte{pkProto, 3, pkNone, pkStop}, "pickle offset 0: PROTO 3: want protocol 2, first"},
		{"unknown opcode", []byte{pkProto, 2, 'I', '1', '\n', pkStop}, "pickle offset 2: opcode 0x49: not one a Planetoid file uses"},
		{"wrong global", append([]byte{pkProto, 2, pkGlobal}, "os\nsystem\n"...), "pickle offset 2: global \"os\".\"system\": not one a Planetoid file names"},
		{"global without newline", append([]byte{pkProto, 2, pkGlobal}, "numpy\nndarray"...), "pickle offset 2: truncated: GLOBAL without its newline"},
		// A BINSTRING that states 2 GiB in a 9-byte file.
		{"huge string", []byte{pkProto, 2, pkBinstring, 0xff, 0xff, 0xff, 0x7f, pkStop}, "pickle offset 2: truncated: string of 2147483647 bytes, 1 left"},
		{"negative string", []byte{pkProto, 2, pkBinstring, 0xff, 0xff, 0xff, 0xff, pkStop}, "pickle offset 2: truncated: string of -1 bytes, 1 left"},
		{"truncated int", []byte{pkProto, 2, pkBinint, 1}, "pickle offset 2: truncated: opcode 0x4a wants 4 bytes, 1 left"},
		{"truncated array", good[:len(good)-3], "truncated"},
		{"after stop", append(slices.Clone(good), 0), "1 bytes after STOP"},
		{"memo never put", []byte{pkProto, 2, pkLongBinget, 9, 0, 0, 0, pkStop}, "pickle offset 2: memo get 9: never put"},
		{"two values", []byte{pkProto, 2, pkNone, pkNone, pkStop}, "STOP with 2 values on the stack, want 1"},
		{"tuple without mark", []byte{pkProto, 2, pkNone, pkTuple, pkStop}, "pickle offset 3: TUPLE without MARK"},
		{"tuple2 short", []byte{pkProto, 2, pkMark, pkNone, pkTuple2}, "pickle offset 4: TUPLE2 with 1 values above the mark"},
		{"append to int", []byte{pkProto, 2, pkBinint1, 1, pkNone, pkAppend, pkStop}, "pickle offset 5: APPEND(S) to int, not a list"},
		{"dict key list", []byte{pkProto, 2, pkEmptyDict, pkEmptyList, pkNone, pkSetitem, pkStop}, "dict key of type list: want int or str"},
		{"build of dict", []byte{pkProto, 2, pkEmptyDict, pkNone, pkBuild, pkStop}, "BUILD of dict: want an object made by REDUCE or NEWOBJ"},
		{"reduce of list", append(append([]byte{pkProto, 2, pkGlobal}, "__builtin__\nlist\n"...), pkEmptyTuple, pkReduce, pkStop),
			"REDUCE of __builtin__ list with 0 arguments: not a call a Planetoid file makes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := unpickle(c.data)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// TestPickleTypedErrors: well-formed pickles of the wrong shape or type.
func TestPickleTypedErrors(t *testing.T) {
	csrOf := func(m *csrMatrix) func() error {
		return func() error {
			v, err := unpickle(pickleCSRBytes(m))
			if err == nil {
				_, err = pickleCSR(v)
			}
			return err
		}
	}
	arr := func(shape []int, dtype string, raw []byte, rank int) func() error {
		return func() error {
			v, err := unpickle(newPkw().ndarray(shape, dtype, raw).op(pkStop).b)
			if err != nil {
				return err
			}
			a, err := pickleNDArray(v)
			if err == nil {
				_, err = a.ints(rank)
			}
			return err
		}
	}
	for _, c := range []struct {
		name string
		run  func() error
		want string
	}{
		{"index out of range", csrOf(&csrMatrix{rows: 1, cols: 2, indptr: []int32{0, 1}, indices: []int32{2}, data: []float32{1}}),
			"csr_matrix column index 2 (value 0) out of range: 2 columns"},
		{"indptr not monotone", csrOf(&csrMatrix{rows: 2, cols: 2, indptr: []int32{0, 2, 1}, indices: []int32{0, 1}, data: []float32{1, 1}}),
			"csr_matrix indptr[2] = 1: want 0 at 0, then monotone up to 2 values"},
		{"indptr short", csrOf(&csrMatrix{rows: 3, cols: 2, indptr: []int32{0, 1}, indices: []int32{0}, data: []float32{1}}),
			"csr_matrix of 3 rows has 2 indptr entries, want 4"},
		{"values short", csrOf(&csrMatrix{rows: 1, cols: 2, indptr: []int32{0, 2}, indices: []int32{0, 1}, data: []float32{1}}),
			"csr_matrix has 2 column indices but 1 values"},
		{"nan value", csrOf(&csrMatrix{rows: 1, cols: 2, indptr: []int32{0, 1}, indices: []int32{0}, data: []float32{float32(math.NaN())}}),
			"csr_matrix data: value 0 is NaN, not a finite number"},
		{"wrong dtype", arr([]int{2}, "f8", make([]byte, 16), 1), "dtype(\"f8\", 0, 1): want int32 (i4) or float32 (f4)"},
		{"float as int", arr([]int{2}, "f4", make([]byte, 8), 1), "array of f4 and shape [2]: want int32 of 1 dimensions"},
		{"shape vs bytes", arr([]int{2, 3}, "i4", make([]byte, 20), 2), "ndarray of shape [2 3] holds 20 bytes, want 4 a value"},
		{"shape overflow", arr([]int{1 << 30, 1 << 30, 1 << 30}, "i4", make([]byte, 8), 3), "ndarray of shape [1073741824 1073741824 1073741824] holds 8 bytes"},
		{"rank", arr([]int{2}, "i4", make([]byte, 8), 2), "want int32 of 2 dimensions"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.run()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
	v, _ := unpickle(pickleGraph([]int{1, 1}, map[int][]int{1: {2}}))
	if _, _, _, err := pickleAdjacency(v); err == nil || err.Error() != "key 1 twice" {
		t.Errorf("repeated key: %v", err)
	}
	v, _ = unpickle(newPkw().op(pkEmptyDict, pkBinint1, 1, pkEmptyList, pkBinint, 0xff, 0xff, 0xff, 0xff, pkAppend, pkSetitem, pkStop).b)
	if _, _, _, err := pickleAdjacency(v); err == nil || !strings.Contains(err.Error(), "key 1: neighbour -1 (int): want a node index") {
		t.Errorf("negative neighbour: %v", err)
	}
}

// FuzzUnpickle decodes arbitrary bytes with every typed reader. Each
// either refuses them with an error or returns arrays that agree with
// each other; a csr matrix decoded encodes and decodes back to itself;
// and nothing allocates more than a small multiple of the input
// (measured over the whole process, so run it with -parallel 1).
func FuzzUnpickle(f *testing.F) {
	f.Add(pickleCSRBytes(&csrMatrix{rows: 3, cols: 4, indptr: []int32{0, 2, 2, 3}, indices: []int32{0, 3, 1}, data: []float32{1, 0.25, -2}}))
	f.Add(pickleOneHot([]int{2, -1, 0}, 3))
	f.Add(pickleGraph([]int{0, 1, 2}, map[int][]int{0: {1, 2}, 1: {0}, 2: {0, 2, 2}}))
	f.Add(pickleGraph([]int{300}, map[int][]int{300: {70000}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		v, err := unpickle(data)
		if err != nil {
			return
		}
		if m, err := pickleCSR(v); err == nil {
			if len(m.indptr) != m.rows+1 || len(m.indices) != len(m.data) || int(m.indptr[m.rows]) != len(m.data) {
				t.Fatalf("csr of %d rows: %d indptr, %d indices, %d values", m.rows, len(m.indptr), len(m.indices), len(m.data))
			}
			for _, c := range m.indices {
				if c < 0 || int(c) >= m.cols {
					t.Fatalf("column %d of %d", c, m.cols)
				}
			}
			v2, err := unpickle(pickleCSRBytes(m))
			if err != nil {
				t.Fatal(err)
			}
			m2, err := pickleCSR(v2)
			if err != nil {
				t.Fatal(err)
			}
			rdEq(t, "re-decoded", m2, m)
		}
		if a, err := pickleNDArray(v); err == nil {
			n := 1
			for _, d := range a.shape {
				n *= d
			}
			if 4*n != len(a.raw) {
				t.Fatalf("shape %v with %d bytes", a.shape, len(a.raw))
			}
			a.ints(len(a.shape))
			a.floats(len(a.shape))
		}
		if src, dst, _, err := pickleAdjacency(v); err == nil && len(src) != len(dst) {
			t.Fatalf("%d sources, %d destinations", len(src), len(dst))
		}
		runtime.ReadMemStats(&ms)
		if grew := ms.TotalAlloc - before; grew > 256*uint64(len(data))+1<<20 {
			t.Fatalf("decoding %d bytes allocated %d", len(data), grew)
		}
	})
}
