package partition

// Reading each of a Planetoid dataset's files: pickles, sparse matrices,
// one-hot labels and the test index.

import (
	"fmt"
	"io"
	"slices"
)

// unpickle reads and decodes the pickle of suffix.
func (r *planetoidReader) unpickle(suffix string) (any, error) {
	if err := r.ctx.Err(); err != nil {
		return nil, err
	}
	data, err := r.readAll(suffix)
	if err != nil {
		return nil, err
	}
	v, err := unpickle(data)
	if err != nil {
		return nil, r.errorf(suffix, "%v", err)
	}
	return v, nil
}

// readAll reads the file of suffix, decompressed when it is gzip.
func (r *planetoidReader) readAll(suffix string) ([]byte, error) {
	in, err := openInput(r.path(suffix))
	if err != nil {
		return nil, err
	}
	defer in.Close()
	data, err := io.ReadAll(in.r)
	if err != nil {
		return nil, fmt.Errorf("partition: %s: %v: %w", in.path, err, ErrFormat)
	}
	r.done += in.size
	r.opts.Progress.report("read planetoid", r.done, r.size)
	if suffix == "x" || suffix == "tx" || suffix == "allx" {
		r.featBytes += int64(len(data))
	}
	return data, nil
}

func (r *planetoidReader) csr(suffix string) (*csrMatrix, error) {
	v, err := r.unpickle(suffix)
	if err != nil {
		return nil, err
	}
	m, err := pickleCSR(v)
	if err != nil {
		return nil, r.errorf(suffix, "%v", err)
	}
	return m, nil
}

// labelRows are one-hot label rows turned into class indices (-1: a row
// of zeros).
type labelRows struct {
	rows, cols int
	labels     []int32
}

func (r *planetoidReader) oneHot(suffix string) (*labelRows, error) {
	v, err := r.unpickle(suffix)
	if err != nil {
		return nil, err
	}
	a, err := pickleNDArray(v)
	var vals []int32
	if err == nil {
		vals, err = a.ints(2)
	}
	if err == nil && a.shape[1] == 0 {
		err = fmt.Errorf("one-hot labels of shape %v: no classes", a.shape)
	}
	if err != nil {
		return nil, r.errorf(suffix, "%v", err)
	}
	l := &labelRows{rows: a.shape[0], cols: a.shape[1], labels: make([]int32, a.shape[0])}
	for i := range l.labels {
		l.labels[i] = -1
		for k, x := range vals[i*l.cols : (i+1)*l.cols] {
			switch {
			case x == 0:
			case x == 1 && l.labels[i] < 0:
				l.labels[i] = int32(k)
			default:
				return nil, r.errorf(suffix, "row %d is not one-hot: column %d is %d", i, k, x)
			}
		}
	}
	return l, nil
}

// testIndex reads test.index: one node index per line, each once.
func (r *planetoidReader) testIndex() ([]uint32, error) {
	var test []uint32
	seen := map[uint32]int64{}
	err := scanFile(r.ctx, r.path("test.index"), nil, func(s *lineScanner, line []byte) error {
		if len(line) == 0 {
			return nil
		}
		v, ok := parseUint(line)
		if !ok || v > maxNarrowID {
			return s.errorf("%q is not a node index", line)
		}
		if prev, dup := seen[uint32(v)]; dup {
			return s.errorf("node %d listed twice (line %d)", v, prev)
		}
		seen[uint32(v)] = s.line
		test = append(test, uint32(v))
		return nil
	})
	return test, err
}

// firstRowDiff is the first row of m that differs from that row of o,
// which has at least as many rows.
func (m *csrMatrix) firstRowDiff(o *csrMatrix) (int, bool) {
	for i := range m.rows {
		a, b := m.indptr[i], m.indptr[i+1]
		c, d := o.indptr[i], o.indptr[i+1]
		if b-a != d-c || !slices.Equal(m.indices[a:b], o.indices[c:d]) || !slices.Equal(m.data[a:b], o.data[c:d]) {
			return i, true
		}
	}
	return 0, false
}

// fill writes row i of m into row to(i) of the dense rows of width d.
func (m *csrMatrix) fill(dense []float32, d int, to func(int) int) {
	for i := range m.rows {
		row := dense[to(i)*d : (to(i)+1)*d]
		for k := m.indptr[i]; k < m.indptr[i+1]; k++ {
			row[m.indices[k]] = m.data[k]
		}
	}
}
