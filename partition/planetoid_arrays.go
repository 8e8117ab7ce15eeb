package partition

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// The typed side of the Planetoid pickles: what unpickle returns, checked
// and turned into Go arrays. Each function names what is wrong; the
// caller adds the file.

// ndarray is a numpy array of one of the dtypes the files use, with its
// raw little-endian bytes (a slice of the input).
type ndarray struct {
	shape []int
	dtype string // "i4" or "f4"
	raw   []byte
}

// pickleNDArray checks that v is a C-ordered little-endian int32 or
// float32 ndarray whose bytes fill its shape.
func pickleNDArray(v any) (ndarray, error) {
	o, ok := v.(*pyObject)
	if !ok || o.cls != pyNDArray {
		return ndarray{}, fmt.Errorf("%s, want a numpy ndarray", pyKind(v))
	}
	// _reconstruct(ndarray, (0,), 'b'); args[0] is checked by pyCall.
	if t, ok := o.args[1].(pyTuple); !ok || len(t) != 1 || t[0] != int64(0) || !isStr(o.args[2], "b") {
		return ndarray{}, fmt.Errorf("ndarray made by _reconstruct(ndarray, %s, %s): want (0,), 'b'", pyKind(o.args[1]), pyKind(o.args[2]))
	}
	st, ok := o.state.(pyTuple)
	if !o.built || !ok || len(st) != 5 {
		return ndarray{}, fmt.Errorf("ndarray state %s: want (1, shape, dtype, fortran, bytes)", pyKind(o.state))
	}
	if st[0] != int64(1) {
		return ndarray{}, fmt.Errorf("ndarray state version %v: want 1", st[0])
	}
	dims, ok := st[1].(pyTuple)
	if !ok {
		return ndarray{}, fmt.Errorf("ndarray shape %s: want a tuple", pyKind(st[1]))
	}
	dtype, err := pickleDtype(st[2])
	if err != nil {
		return ndarray{}, err
	}
	if st[3] != false {
		return ndarray{}, fmt.Errorf("ndarray in Fortran order (%v): want C order", st[3])
	}
	raw, ok := st[4].(pyStr)
	if !ok {
		return ndarray{}, fmt.Errorf("ndarray data %s: want a str of bytes", pyKind(st[4]))
	}
	a := ndarray{dtype: dtype, raw: raw}
	// The product of the shape must be len(raw)/4; it is computed capped
	// at that, so that no shape overflows it.
	want := int64(len(raw) / 4)
	n, zero, over := int64(1), false, false
	for i, d := range dims {
		di, ok := d.(int64)
		if !ok || di < 0 || di > math.MaxInt32 {
			return ndarray{}, fmt.Errorf("ndarray shape[%d] %v: want a count below 2^31", i, d)
		}
		a.shape = append(a.shape, int(di))
		switch {
		case di == 0:
			zero = true
		case n > want/di:
			over = true
		default:
			n *= di
		}
	}
	if zero {
		n, over = 0, false
	}
	if over || n*4 != int64(len(raw)) {
		return ndarray{}, fmt.Errorf("ndarray of shape %v holds %d bytes, want 4 a value", a.shape, len(raw))
	}
	return a, nil
}

// pickleDtype checks a numpy dtype object: i4 or f4, little-endian.
func pickleDtype(v any) (string, error) {
	o, ok := v.(*pyObject)
	if !ok || o.cls != pyDtype {
		return "", fmt.Errorf("dtype %s: want a numpy dtype", pyKind(v))
	}
	kind, _ := o.args[0].(pyStr)
	if string(kind) != "i4" && string(kind) != "f4" || o.args[1] != int64(0) || o.args[2] != int64(1) {
		return "", fmt.Errorf("dtype(%q, %v, %v): want int32 (i4) or float32 (f4)", kind, o.args[1], o.args[2])
	}
	// (3, '<', None, None, None, -1, -1, 0): version, byte order, no
	// fields, no subarray, element size and alignment of a plain type,
	// no flags.
	st, ok := o.state.(pyTuple)
	if !o.built || !ok || len(st) != 8 || st[0] != int64(3) || st[2] != nil || st[3] != nil || st[4] != nil ||
		st[5] != int64(-1) || st[6] != int64(-1) || st[7] != int64(0) {
		return "", fmt.Errorf("dtype %s: state not that of a plain little-endian number", kind)
	}
	if !isStr(st[1], "<") {
		return "", fmt.Errorf("dtype %s: byte order %v, want little-endian '<'", kind, st[1])
	}
	return string(kind), nil
}

func isStr(v any, s string) bool {
	b, ok := v.(pyStr)
	return ok && string(b) == s
}

// ints checks a's dtype and rank and returns its values.
func (a ndarray) ints(rank int) ([]int32, error) {
	if a.dtype != "i4" || len(a.shape) != rank {
		return nil, fmt.Errorf("array of %s and shape %v: want int32 of %d dimensions", a.dtype, a.shape, rank)
	}
	out := make([]int32, len(a.raw)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(a.raw[4*i:]))
	}
	return out, nil
}

// floats checks a's dtype and rank and returns its values, which must be
// finite.
func (a ndarray) floats(rank int) ([]float32, error) {
	if a.dtype != "f4" || len(a.shape) != rank {
		return nil, fmt.Errorf("array of %s and shape %v: want float32 of %d dimensions", a.dtype, a.shape, rank)
	}
	out := make([]float32, len(a.raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(a.raw[4*i:]))
		if !finite32(out[i]) {
			return nil, fmt.Errorf("value %d is %v, not a finite number", i, out[i])
		}
	}
	return out, nil
}

// csrMatrix is a scipy.sparse csr_matrix: row r's columns are
// indices[indptr[r]:indptr[r+1]], with values data[...].
type csrMatrix struct {
	rows, cols int
	indptr     []int32
	indices    []int32
	data       []float32
}

// csrStateKeys are the keys of a csr_matrix's state that carry nothing
// the reader needs (print width, sortedness flags).
var csrStateKeys = []string{"maxprint", "_cs_matrix__has_sorted_indices", "_has_sorted_indices", "_has_canonical_format"}

// pickleCSR checks that v is a csr_matrix whose arrays agree with its
// shape: indptr monotone from 0 to nnz, column indices below cols.
func pickleCSR(v any) (*csrMatrix, error) {
	o, ok := v.(*pyObject)
	if !ok || o.cls != pyCSR {
		return nil, fmt.Errorf("%s, want a scipy csr_matrix", pyKind(v))
	}
	d, ok := o.state.(*pyDict)
	if !o.built || !ok || d.factory != "" {
		return nil, fmt.Errorf("csr_matrix state %s: want a dict", pyKind(o.state))
	}
	fields := map[string]any{}
	for _, it := range d.items {
		k, ok := it.key.(pyStr)
		if !ok {
			return nil, fmt.Errorf("csr_matrix state key of type %s", pyKind(it.key))
		}
		key := string(k)
		switch key {
		case "format", "_shape", "indptr", "indices", "data":
		default:
			if !slices.Contains(csrStateKeys, key) {
				return nil, fmt.Errorf("csr_matrix state key %q: not one this reader knows", key)
			}
		}
		if _, dup := fields[key]; dup {
			return nil, fmt.Errorf("csr_matrix state key %q twice", key)
		}
		fields[key] = it.val
	}
	for _, k := range []string{"format", "_shape", "indptr", "indices", "data"} {
		if _, ok := fields[k]; !ok {
			return nil, fmt.Errorf("csr_matrix state without %q", k)
		}
	}
	if !isStr(fields["format"], "csr") {
		return nil, fmt.Errorf("csr_matrix format %s: want 'csr'", pyKind(fields["format"]))
	}
	shape, ok := fields["_shape"].(pyTuple)
	if !ok || len(shape) != 2 {
		return nil, fmt.Errorf("csr_matrix _shape %s: want (rows, cols)", pyKind(fields["_shape"]))
	}
	rows, ok1 := shape[0].(int64)
	cols, ok2 := shape[1].(int64)
	if !ok1 || !ok2 || rows < 0 || cols < 0 || cols > math.MaxInt32 {
		return nil, fmt.Errorf("csr_matrix _shape (%v, %v): want two counts", shape[0], shape[1])
	}
	m := &csrMatrix{cols: int(cols)}
	var err error
	for _, f := range []struct {
		name string
		to   *[]int32
	}{{"indptr", &m.indptr}, {"indices", &m.indices}} {
		a, err := pickleNDArray(fields[f.name])
		if err == nil {
			*f.to, err = a.ints(1)
		}
		if err != nil {
			return nil, fmt.Errorf("csr_matrix %s: %w", f.name, err)
		}
	}
	a, err := pickleNDArray(fields["data"])
	if err == nil {
		m.data, err = a.floats(1)
	}
	if err != nil {
		return nil, fmt.Errorf("csr_matrix data: %w", err)
	}
	if int64(len(m.indptr)) != rows+1 {
		return nil, fmt.Errorf("csr_matrix of %d rows has %d indptr entries, want %d", rows, len(m.indptr), rows+1)
	}
	m.rows = int(rows)
	nnz := len(m.indices)
	if len(m.data) != nnz {
		return nil, fmt.Errorf("csr_matrix has %d column indices but %d values", nnz, len(m.data))
	}
	for r := 0; r <= m.rows; r++ {
		p := m.indptr[r]
		if r == 0 && p != 0 || r > 0 && p < m.indptr[r-1] || int(p) > nnz {
			return nil, fmt.Errorf("csr_matrix indptr[%d] = %d: want 0 at 0, then monotone up to %d values", r, p, nnz)
		}
	}
	if int(m.indptr[m.rows]) != nnz {
		return nil, fmt.Errorf("csr_matrix indptr ends at %d, but there are %d values", m.indptr[m.rows], nnz)
	}
	for i, c := range m.indices {
		if c < 0 || int(c) >= m.cols {
			return nil, fmt.Errorf("csr_matrix column index %d (value %d) out of range: %d columns", c, i, m.cols)
		}
	}
	return m, nil
}

// pickleAdjacency checks that v is a dict (or defaultdict(list)) from
// node index to a list of node indices and returns its (key, neighbour)
// pairs in the file's order and its keys.
func pickleAdjacency(v any) (src, dst, keys []uint32, err error) {
	d, ok := v.(*pyDict)
	if !ok {
		return nil, nil, nil, fmt.Errorf("%s, want a dict of neighbour lists", pyKind(v))
	}
	index := func(x any, what string) (uint32, error) {
		i, ok := x.(int64)
		if !ok || i < 0 || i > maxNarrowID {
			return 0, fmt.Errorf("%s %v (%s): want a node index below %d", what, x, pyKind(x), uint64(maxNarrowID)+1)
		}
		return uint32(i), nil
	}
	keys = make([]uint32, 0, len(d.items))
	for _, it := range d.items {
		k, err := index(it.key, "key")
		if err != nil {
			return nil, nil, nil, err
		}
		l, ok := it.val.(*pyListV)
		if !ok {
			return nil, nil, nil, fmt.Errorf("key %d: %s, want a list of neighbours", k, pyKind(it.val))
		}
		for _, x := range l.items {
			n, err := index(x, fmt.Sprintf("key %d: neighbour", k))
			if err != nil {
				return nil, nil, nil, err
			}
			src, dst = append(src, k), append(dst, n)
		}
		keys = append(keys, k)
	}
	s := slices.Clone(keys)
	slices.Sort(s)
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			return nil, nil, nil, fmt.Errorf("key %d twice", s[i])
		}
	}
	return src, dst, keys, nil
}
