package csr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpen writes arbitrary bytes to a file and opens it: Open returns a
// graph or an error, never panics, and every accessor of a graph it
// returns is safe. With fixCRC the header CRC is recomputed first, so that
// mutations reach the checks behind it.
func FuzzOpen(f *testing.F) {
	dir := f.TempDir()
	for _, ft := range []ElemType{TypeF32, TypeF16} {
		path := filepath.Join(dir, "seed-"+ft.String())
		newFixture(ft).write(f, path)
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, true, false)
		f.Add(b, false, true)
	}
	path := filepath.Join(memDir(f), "fuzz.csr")
	f.Fuzz(func(t *testing.T, b []byte, fixCRC, verify bool) {
		b = bytes.Clone(b) // the fuzzer owns its input
		if fixCRC && len(b) >= fixedLen {
			if end := fixedLen + int(binary.LittleEndian.Uint16(b[78:]))*entryLen; len(b) >= end+4 {
				fixHeaderCRC(b)
			}
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		g, err := Open(path, OpenOptions{Verify: verify})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error %v wraps neither ErrCorrupt nor ErrVersion", err)
			}
			return
		}
		defer g.Close()
		touchAll(t, g)
	})
}

// touchAll calls every accessor and reads every byte of every view.
func touchAll(t *testing.T, g *Graph) {
	m := g.Meta()
	n := g.NumNodes()
	if uint64(n) != m.End-m.Start || uint64(g.NumEdges()) != m.NumEdges || len(g.Indptr()) != n+1 {
		t.Fatalf("nodes %d edges %d indptr %d for meta %+v", n, g.NumEdges(), len(g.Indptr()), m)
	}
	var sum uint64
	for v := range uint32(n) {
		for _, x := range g.Neighbors(v) {
			if x >= m.TotalNodes {
				t.Fatalf("node %d has neighbour %d >= %d", v, x, m.TotalNodes)
			}
			sum += x
		}
		for _, c := range g.FeatRow(v) {
			sum += uint64(c)
		}
	}
	for _, x := range g.Weights() {
		sum += uint64(x)
	}
	for _, x := range g.Etypes() {
		sum += uint64(x)
	}
	for _, x := range g.FeatF32() {
		sum += uint64(x)
	}
	for _, x := range g.Labels() {
		sum += uint64(x)
	}
	for _, x := range g.CacheIDs() {
		sum += x
	}
	if len(g.CacheFeat()) != len(g.CacheIDs())*g.RowBytes() {
		t.Fatalf("%d cache rows of %d bytes, %d cache ids", len(g.CacheFeat()), g.RowBytes(), len(g.CacheIDs()))
	}
	for _, s := range g.Sections() {
		b, err := g.Section(s.Name)
		if err != nil || uint64(len(b)) != s.Length {
			t.Fatalf("section %s: %d bytes, %v", s.Name, len(b), err)
		}
		if s.Type == TypeRoaring {
			bm, err := g.Mask(s.Name)
			if isMask(s.Name) && (err != nil || !bm.IsEmpty() && uint64(bm.Maximum()) >= uint64(n)) {
				t.Fatalf("mask %s: %v, %v; Open checked it", s.Name, bm, err)
			}
		}
	}
	_ = sum
}

// memDir is a directory in memory when the host has /dev/shm: rewriting a
// file on disk thousands of times a second stalls on writeback, which the
// fuzzer reports as a hung worker.
func memDir(f *testing.F) string {
	dir, err := os.MkdirTemp("/dev/shm", "csr-fuzz-")
	if err != nil {
		return f.TempDir()
	}
	f.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
