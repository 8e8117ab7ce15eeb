package multilevel

// gpmetis's side of the format: WriteMETIS writes a graph for it, and
// ReadPartition reads the partition it writes.

import (
	"bufio"
	"io"
	"strconv"
)

// WriteMETIS writes g in the METIS graph format for gpmetis: header
// "n m" ("n m fmt ncon" with weights: fmt 010 vertex weights, 001 edge
// weights, 011 both), then one 1-based line per vertex. g must be what
// METIS accepts, and WriteMETIS checks it all: Graph.Validate (ranges,
// weights, no self loops), no duplicate neighbour in a row, and symmetry:
// every entry (v, u, w) has its twin (u, v, w). Symmetry is checked with
// a sum over entries of hash(v, u, w) - hash(u, v, w), which is zero for
// a symmetric graph and, for an asymmetric one, zero only with
// probability about 2^-64; the check needs no memory beyond one uint32
// per vertex (for the duplicates).
func WriteMETIS(w io.Writer, g *Graph) error {
	if err := g.Validate(); err != nil {
		return errorOf(err, "write metis")
	}
	n := g.NumVertices()
	stamp := make([]uint32, n)
	for v := range n {
		for e := g.Xadj[v]; e < g.Xadj[v+1]; e++ {
			u := g.Adjncy[e]
			if stamp[u] == uint32(v)+1 {
				return errorOf(ErrBadGraph, "write metis: vertex ", itoa(v), " lists neighbour ", itoa(u), " twice")
			}
			stamp[u] = uint32(v) + 1
		}
	}
	if metisAsymSum(g) != 0 {
		return errorOf(ErrBadGraph, "write metis: not symmetric (some edge u-v lacks v-u with the same weight)")
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	b := make([]byte, 0, 256)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, g.NumEdges(), 10)
	if g.Vwgt != nil || g.Adjwgt != nil {
		f := "001"
		if g.Vwgt != nil {
			f = "010"
			if g.Adjwgt != nil {
				f = "011"
			}
		}
		b = append(b, ' ')
		b = append(b, f...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(g.ncon()), 10)
	}
	b = append(b, '\n')
	nc := g.ncon()
	for v := range n {
		if g.Vwgt != nil {
			for c := range nc {
				b = strconv.AppendInt(b, g.Vwgt[v*nc+c], 10)
				b = append(b, ' ')
			}
		}
		for e := g.Xadj[v]; e < g.Xadj[v+1]; e++ {
			b = strconv.AppendUint(b, uint64(g.Adjncy[e])+1, 10)
			b = append(b, ' ')
			if g.Adjwgt != nil {
				b = strconv.AppendInt(b, int64(g.Adjwgt[e]), 10)
				b = append(b, ' ')
			}
		}
		if len(b) > 0 && b[len(b)-1] == ' ' {
			b = b[:len(b)-1]
		}
		b = append(b, '\n')
		if len(b) >= 64<<10 {
			if _, err := bw.Write(b); err != nil {
				return errorOf(err, "write metis")
			}
			b = b[:0]
		}
	}
	if _, err := bw.Write(b); err != nil {
		return errorOf(err, "write metis")
	}
	if err := bw.Flush(); err != nil {
		return errorOf(err, "write metis")
	}
	return nil
}

// ReadPartition reads a gpmetis partition file (graph.part.K) of a graph
// of n vertices: n lines, line i the part of vertex i-1. name is used in
// errors.
func ReadPartition(r io.Reader, n int, name string) ([]uint32, error) {
	s := bufio.NewScanner(r)
	parts := make([]uint32, 0, n)
	var line int64
	for s.Scan() {
		line++
		b := s.Bytes() // ScanLines drops "\n" and "\r\n"
		if len(b) == 0 {
			continue
		}
		p, err := strconv.ParseUint(string(b), 10, 32)
		if err != nil {
			return nil, &LineError{File: name, Line: line, Msg: "part " + strconv.Quote(string(b)) + " is not a partition number"}
		}
		if len(parts) == n {
			return nil, &LineError{File: name, Line: line, Msg: "more than the " + itoa(n) + " vertices"}
		}
		parts = append(parts, uint32(p))
	}
	if err := s.Err(); err != nil {
		return nil, errorOf(err, name)
	}
	if len(parts) != n {
		return nil, errorOf(ErrFormat, name, ": ", itoa(len(parts)), " lines, want ", itoa(n), " vertices")
	}
	return parts, nil
}
