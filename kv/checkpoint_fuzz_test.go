package kv

import (
	"bytes"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary checkpoint files to Load. With fixCRC the
// fuzzer's bytes get valid header and body CRCs first, so that mutations
// reach the checks behind them (fields, flags, sizes) instead of all
// stopping at a CRC. A file Load refuses must be refused with one of the
// package's errors, naming the file, and leave the table as it was; a
// file it accepts must hold exactly what Save then writes: the same
// body, version and table fields. Seeds: a file of this version, one as
// version 1.0 wrote it (no save id) and an exit save's under the
// coordinated save's name (refused).
func FuzzLoad(f *testing.F) {
	sp := spec("adam", 40, 4, Adam(0.01, 0.9, 0.999, 1e-8), Async, 2)
	s := newStore(f, 1, sp)
	lo, hi := sp.Range(1)
	ids := idRange(lo, hi)
	grads := make([]float32, len(ids)*sp.Dim)
	for i := range grads {
		grads[i] = float32(i%7) - 3
	}
	if err := s.Push("adam", ids, grads); err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	if err := s.Save(dir); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(dir, FileName("adam", 1)))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good, false)
	f.Add(good, true)
	f.Add(good[:ckHeaderLen], true)
	f.Add(legacyFile(good), false)
	if _, err := s.SaveExit(dir); err != nil {
		f.Fatal(err)
	}
	exit, err := os.ReadFile(filepath.Join(dir, ExitFileName("adam", 1)))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(exit, false)
	f.Fuzz(func(t *testing.T, file []byte, fixCRC bool) {
		if fixCRC && len(file) >= ckHeaderLen+4 {
			file = slices.Clone(file)
			le.PutUint32(file[ckHeaderCRC:], crc32.Checksum(file[:ckHeaderCRC], crcTable()))
			le.PutUint32(file[ckSaveCRC:], crc32.Checksum(file[:ckSaveCRC], crcTable()))
			body := file[ckHeaderLen : len(file)-4]
			le.PutUint32(file[len(file)-4:], crc32.Checksum(body, crcTable()))
		}
		dir := t.TempDir()
		path := filepath.Join(dir, FileName("adam", 1))
		if err := os.WriteFile(path, file, 0o644); err != nil {
			t.Fatal(err)
		}
		fresh := newStore(t, 1, sp)
		before := snapshot(t, fresh)
		err := fresh.LoadTable(dir, "adam")
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) && !errors.Is(err, ErrMismatch) {
				t.Fatalf("refused with %v: not ErrCorrupt, ErrVersion or ErrMismatch", err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name %s", err, path)
			}
			if after := snapshot(t, fresh); !slices.Equal(after["adam"], before["adam"]) {
				t.Fatal("a refused checkpoint left the table changed")
			}
			return
		}
		out := t.TempDir()
		if err := fresh.Save(out); err != nil {
			t.Fatal(err)
		}
		saved, err := os.ReadFile(filepath.Join(out, FileName("adam", 1)))
		if err != nil {
			t.Fatal(err)
		}
		if len(saved) != len(file) || !bytes.Equal(saved[ckHeaderLen:], file[ckHeaderLen:]) {
			t.Fatalf("accepted a %d byte file whose body does not come back: saved %d bytes", len(file), len(saved))
		}
		// Table fields, version and name; hyperparameters and the
		// initialiser may differ (see Load).
		for _, r := range [][2]int{{0, 8}, {12, 60}, {61, 64}, {96, ckHeaderCRC}} {
			if a, b := file[r[0]:r[1]], saved[r[0]:r[1]]; !bytes.Equal(a, b) {
				t.Fatalf("accepted header bytes %d..%d %x, saved as %x", r[0], r[1], a, b)
			}
		}
		// The save it was loaded as is the file's.
		want, err := decodeSaveInfo(file[:ckHeaderLen])
		if l, ok := fresh.Loaded("adam"); err != nil || !ok || l.Save != want || l.Path != path {
			t.Fatalf("accepted a file of %+v (%v) and recorded %+v (%v)", want, err, l, ok)
		}
	})
}

// FuzzSaveInfo decodes the save fields of arbitrary headers (the first
// CRC made valid, as a header reaches decodeSaveInfo only then): a
// header accepted re-encodes to the same bytes, and putSaveInfo's
// output decodes to what it was given.
func FuzzSaveInfo(f *testing.F) {
	s := newStore(f, 0, spec("w", 8, 2, SGD(1), Async, 2))
	tab, _ := s.table("w")
	for _, info := range []SaveInfo{{ID: 1}, {ID: 7, Exit: true, Base: 3}, {ID: 9, Exit: true}} {
		f.Add(tab.header(0, info), uint64(info.ID), info.Exit, uint64(info.Base))
	}
	f.Add(legacyFile(tab.header(0, SaveInfo{ID: 1})), uint64(0), false, uint64(0))
	f.Fuzz(func(t *testing.T, h []byte, id uint64, exit bool, base uint64) {
		// Fitted to a header's length: an input of another length was
		// dropped, and with it the round trip below, which does not
		// read it (most mutations change the length).
		h = append(slices.Clone(h[:min(len(h), ckHeaderLen)]), make([]byte, ckHeaderLen-min(len(h), ckHeaderLen))...)
		le.PutUint32(h[ckHeaderCRC:], crc32.Checksum(h[:ckHeaderCRC], crcTable()))
		if info, err := decodeSaveInfo(h); err == nil && le.Uint16(h[10:]) != 0 {
			again := slices.Clone(h)
			le.PutUint32(again[12:], le.Uint32(again[12:])&^flagExit)
			putSaveInfo(again, info)
			if !bytes.Equal(again, h) {
				t.Fatalf("accepted %x as %+v, which encodes as %x", h, info, again)
			}
		} else if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("refused with %v: not ErrCorrupt", err)
		}
		in := SaveInfo{ID: SaveID(id), Exit: exit, Base: SaveID(base)}
		if id == 0 || (!exit && base != 0) {
			return
		}
		g := tab.header(0, in)
		if out, err := decodeSaveInfo(g); err != nil || out != in {
			t.Fatalf("encoded %+v, decoded %+v (%v)", in, out, err)
		}
	})
}
