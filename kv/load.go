package kv

import (
	"bufio"
	"bytes"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
)

// Load restores every table shard from dir (files written by Save with
// this store's part): rows, optimiser state and version, so training
// resumes exactly where the checkpoint was taken. A file is refused, with
// an error naming it, when its magic, major version or a CRC is wrong or it
// is truncated (ErrCorrupt, ErrVersion), or when its table does not match
// the configured one (ErrMismatch, naming the field: name, part, parts,
// rows, dim, shard range, optimiser, mode). Hyperparameters (lr, eps,
// betas) and the initialiser may differ: the configured ones apply from
// here on. A table whose body fails its CRC is reset to its initial
// values before Load returns the error. A synchronous step being gathered
// on a table that Load restores (or resets) fails with ErrStepFailed. A
// save that a crash interrupted is finished or undone first (Recover).
//
// Each table is loaded from this part's exit save when it is newer than
// its file of the last coordinated save, from that file otherwise (see
// pickFile; Loaded says which). Files of different saves are refused
// before any table changes (ErrMixedSaves, naming each file and its
// save); that the other nodes loaded the same generation is the
// caller's to check (Loaded).
func (s *Store) Load(dir string) error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if _, err := recoverSave("load", dir, s.part); err != nil {
		return err
	}
	set := s.set.Load()
	picked := make([]Loaded, len(set.names))
	for i, name := range set.names {
		l, err := set.tables[name].pickFile(dir, s.part)
		if err != nil {
			return err
		}
		picked[i] = l
	}
	if err := sameSave(picked); err != nil {
		return err
	}
	for i, name := range set.names {
		if err := s.loadPicked(set.tables[name], picked[i]); err != nil {
			return err
		}
	}
	return nil
}

// loadPicked loads t from l and records it (Loaded). s.saveMu is held.
func (s *Store) loadPicked(t *table, l Loaded) error {
	s.loadedMu.Lock()
	delete(s.loaded, t.spec.Name)
	s.loadedMu.Unlock()
	// The kind the file's name says, not the one its header claims.
	exit := filepath.Base(l.Path) == ExitFileName(t.spec.Name, s.part)
	if err := t.load(l.Path, s.part, exit); err != nil {
		return err
	}
	l.Sync, l.Version = t.sync != nil, t.version.Load()
	t.origin.Store(&Origin{Loaded: l, FromLoad: true})
	t.keepFiles.Store(false) // the files are the table's
	s.loadedMu.Lock()
	s.loaded[t.spec.Name] = l
	s.loadedMu.Unlock()
	return nil
}

// LoadTable is Load for one table (a table created at run time resumes
// from its checkpoint while the others keep their state).
func (s *Store) LoadTable(dir, name string) error {
	t, err := s.table(name)
	if err != nil {
		return err
	}
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if _, err := recoverSave("load", dir, s.part); err != nil {
		return err
	}
	l, err := t.pickFile(dir, s.part)
	if err != nil {
		return err
	}
	return s.loadPicked(t, l)
}

// load restores t from the checkpoint file at path, an exit save's when
// exit is set.
func (t *table) load(path string, part int, exit bool) error {
	fail := func(err error, format string, args ...any) error {
		return fmt.Errorf("kv: load %s: %s: %w", path, fmt.Sprintf(format, args...), err)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("kv: load: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("kv: load: %w", err)
	}
	r := bufio.NewReaderSize(f, 1<<20)
	h := make([]byte, ckHeaderLen)
	if _, err := io.ReadFull(r, h); err != nil {
		return fail(ErrCorrupt, "header: %d of %d bytes", min(st.Size(), ckHeaderLen), ckHeaderLen)
	}
	if string(h[:8]) != ckMagic {
		return fail(ErrCorrupt, "magic %q, want %q", h[:8], ckMagic)
	}
	if major := le.Uint16(h[8:]); major != CheckpointMajor {
		return fail(ErrVersion, "major version %d, this build reads %d", major, CheckpointMajor)
	}
	if got, want := le.Uint32(h[ckHeaderCRC:]), crc32.Checksum(h[:ckHeaderCRC], crcTable()); got != want {
		return fail(ErrCorrupt, "header CRC %08x, computed %08x", got, want)
	}
	if err := t.checkHeader(h, part); err != nil {
		return fmt.Errorf("kv: load %s: %w", path, err) // ErrMismatch or ErrResized
	}
	wantState := t.spec.Opt.hasState()
	flags := le.Uint32(h[12:])
	if hasState := flags&flagState != 0; hasState != wantState || flags&^(flagState|flagExit) != 0 {
		return fail(ErrCorrupt, "flags %#x for optimiser %s", flags, t.spec.Opt.Kind)
	}
	info, err := decodeSaveInfo(h)
	if err != nil {
		return fmt.Errorf("kv: load %s: header: %w", path, err)
	}
	if info.Exit != exit {
		return fail(ErrCorrupt, "%s in a file named as one of the other kind", info)
	}
	size := int64(ckHeaderLen) + t.bodyLen() + 4
	if hs := le.Uint64(h[16:]); hs != uint64(size) || st.Size() != size {
		return fail(ErrCorrupt, "file is %d bytes, header says %d, table needs %d", st.Size(), hs, size)
	}

	if ss := t.sync; ss != nil {
		// The version changes under the round being gathered: end it, or
		// a push for the loaded version would join a round of the old one
		// and be averaged with its gradients. ss.mu before t.mu, as the
		// step apply takes them.
		ss.mu.Lock()
		defer ss.mu.Unlock()
		if rd := ss.mu.round; rd != nil {
			ss.failLocked(rd, fmt.Errorf("kv: table %q step %d: the table was loaded from %s while the step was gathered; missing trainers %v: %w",
				t.spec.Name, rd.step, path, rd.missing(), ErrStepFailed))
		}
		defer ss.bumpWaitersLocked()
	}
	if err := t.restore(r, le.Uint64(h[96:])); err != nil {
		return fmt.Errorf("kv: load %s: %w", path, err)
	}
	return nil
}

// restore reads the body and its CRC from r under the table's exclusive
// lock and sets the version; on any error it resets the table.
func (t *table) restore(r io.Reader, version uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	crc, err := t.readLocked(r)
	if err == nil {
		var tail [4]byte
		if _, err = io.ReadFull(r, tail[:]); err != nil {
			err = fmt.Errorf("body CRC: %v: %w", err, ErrCorrupt)
		} else if got := le.Uint32(tail[:]); got != crc {
			err = fmt.Errorf("body CRC %08x, computed %08x: %w", got, crc, ErrCorrupt)
		}
	}
	if err != nil {
		t.resetLocked()
		return err
	}
	t.version.Store(version)
	return nil
}

// checkHeader compares the header's table with the configured one and
// names the first field that differs (ErrMismatch; ErrResized when only
// the rows and the shard range do).
func (t *table) checkHeader(h []byte, part int) error {
	s := &t.spec
	n := int(h[63])
	name := string(bytes.TrimRight(h[104:104+MaxNameLen], "\x00"))
	if n > MaxNameLen || n != len(name) {
		name = fmt.Sprintf("%q (length byte %d)", name, n)
	}
	checks := []struct {
		field     string
		file, cfg any
	}{
		{"name", name, s.Name},
		{"part", le.Uint32(h[24:]), uint32(part)},
		{"parts", le.Uint32(h[28:]), uint32(s.Parts())},
		{"rows", le.Uint64(h[32:]), s.Rows},
		{"shard start", le.Uint64(h[40:]), t.lo},
		{"shard end", le.Uint64(h[48:]), t.hi},
		{"dim", le.Uint32(h[56:]), uint32(t.dim)},
		{"optimiser", OptKind(h[61]), s.Opt.Kind},
		{"mode", Mode(h[62]), s.Mode},
	}
	// The first field that differs is named; a file that differs in the
	// rows and the shard range alone is ErrResized.
	var first string
	resized := true
	for _, c := range checks {
		if c.file == c.cfg {
			continue
		}
		if first == "" {
			first = fmt.Sprintf("field %s: file has %v, table has %v", c.field, c.file, c.cfg)
		}
		resized = resized && (c.field == "rows" || c.field == "shard start" || c.field == "shard end")
	}
	if first != "" {
		if resized && le.Uint64(h[32:]) != s.Rows {
			return fmt.Errorf("%s: %w", first, ErrResized)
		}
		return fmt.Errorf("%s: %w", first, ErrMismatch)
	}
	if set := le.Uint32(h[ckIDSet:]); set != 0 && s.IDSet != 0 && set != s.IDSet && set != s.IDSetBefore {
		if s.IDSetRelations {
			return fmt.Errorf("field id set: the file's rows are the relations of a knowledge graph of relations.txt %08x, this table's of %08x: "+
				"another graph's relations are other ones, however many, so the rows would be other relations' "+
				"(serve the graph it was saved with, or move its files aside to start afresh): %w", set, s.IDSet, ErrMismatch)
		}
		return fmt.Errorf("field id set: the file's rows are the node ids of partitioning %08x, this table's of %08x: "+
			"another partitioning of the graph (or another graph of as many nodes) numbers its nodes otherwise, so the rows would be other nodes' "+
			"(serve the partitioning it was saved with, or move its files aside to start afresh): %w", set, s.IDSet, ErrMismatch)
	}
	return nil
}

// readLocked fills the body from r and returns its CRC. t.mu is held.
func (t *table) readLocked(r io.Reader) (uint32, error) {
	crc := uint32(0)
	buf := make([]byte, 1<<16)
	for _, sec := range t.sections() {
		for i := 0; i < sec.n(); {
			k := min(sec.n()-i, len(buf)/4)
			b := buf[:4*k]
			if _, err := io.ReadFull(r, b); err != nil {
				return 0, fmt.Errorf("body: %v: %w", err, ErrCorrupt)
			}
			crc = crc32.Update(crc, crcTable(), b)
			for j := range k {
				sec.set(i+j, le.Uint32(b[4*j:]))
			}
			i += k
		}
	}
	return crc, nil
}

// resetLocked puts the shard back to its initial values. t.mu is held.
func (t *table) resetLocked() {
	for r := range t.n {
		initRow(t.row(r), t.spec.Init, t.lo+uint64(r))
	}
	clear(t.acc)
	clear(t.m)
	clear(t.v)
	clear(t.steps)
	t.version.Store(0)
	t.origin.Store(&Origin{Loaded: Loaded{Sync: t.sync != nil}})
}
