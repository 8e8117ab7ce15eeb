package kv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"
)

// Checkpoint format version written by this package. Load accepts any
// minor version of CheckpointMajor and refuses every other major version.
const (
	CheckpointMajor = 1
	CheckpointMinor = 2 // 1: the save id (checkpoint_saveid.go); 2: the id set (Spec.IDSet)
)

// Checkpoint file layout (see the diagram in doc.go).
const (
	ckMagic     = "GNODEKVT"
	ckHeaderLen = 192 // fixed header region; the body starts here
	ckHeaderCRC = 168 // offset of the header CRC
	ckIDSet     = 92  // Spec.IDSet (minor 2; zero before)
	flagState   = 1   // optimiser state follows the rows
)

// crcTable is the CRC-32C table (hardware accelerated by hash/crc32).
func crcTable() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) }

// FileName is the checkpoint file of shard part of table.
func FileName(table string, part int) string { return fmt.Sprintf("%s.part%d.kvt", table, part) }

// bodyLen is the byte length of the rows and optimiser state of t: its
// memory (Spec.ShardBytes), which New and Create bounded.
func (t *table) bodyLen() int64 { return int64(t.n) * int64(t.spec.rowBytes()) }

// header encodes the checkpoint header of t, of save info. t.mu is held.
func (t *table) header(part int, info SaveInfo) []byte {
	s := &t.spec
	h := make([]byte, 0, ckHeaderLen)
	h = append(h, ckMagic...)
	h = le.AppendUint16(h, CheckpointMajor)
	h = le.AppendUint16(h, CheckpointMinor)
	var flags uint32
	if s.Opt.hasState() {
		flags |= flagState
	}
	h = le.AppendUint32(h, flags)
	h = le.AppendUint64(h, ckHeaderLen+uint64(t.bodyLen())+4)
	h = le.AppendUint32(h, uint32(part))
	h = le.AppendUint32(h, uint32(s.Parts()))
	h = le.AppendUint64(h, s.Rows)
	h = le.AppendUint64(h, t.lo)
	h = le.AppendUint64(h, t.hi)
	h = le.AppendUint32(h, uint32(t.dim))
	h = append(h, byte(s.Init.Kind), byte(s.Opt.Kind), byte(s.Mode), byte(len(s.Name)))
	h = le.AppendUint64(h, s.Init.Seed)
	for _, f := range []float32{s.Init.Scale, s.Opt.LR, s.Opt.Eps, s.Opt.Beta1, s.Opt.Beta2} {
		h = le.AppendUint32(h, math.Float32bits(f))
	}
	h = le.AppendUint32(h, s.IDSet) // ckIDSet; zero before minor 2
	h = le.AppendUint64(h, t.version.Load())
	var name [MaxNameLen]byte
	copy(name[:], s.Name)
	h = append(h, name[:]...)
	h = le.AppendUint32(h, crc32.Checksum(h, crcTable()))
	h = h[:ckHeaderLen]
	putSaveInfo(h, info)
	return h
}

// Save writes one checkpoint file per table shard into dir as one
// atomic step: every table goes to a temporary file that is fsynced, then
// a save journal naming them is committed (see journal.go), and only then
// are they renamed into place, followed by a directory fsync and the
// journal's removal. A failure while writing (a full disk) removes the
// temporaries and leaves the previous checkpoint whole; a crash, or an
// error, after the journal is renamed into place (its directory fsync
// failing) keeps them, and the next Save, Load or Recover finishes the
// save; so a checkpoint is never some tables new and some old. Each table
// is written under its exclusive lock, so each file is one consistent
// snapshot; pushes to that table wait meanwhile. The files are of a new
// save (NewSaveID), and replace this part's exit save.
func (s *Store) Save(dir string) error {
	p, err := s.PrepareSave(context.Background(), dir, NewSaveID())
	if err != nil {
		return err
	}
	return p.Commit()
}

// SaveExit is Save for a node stopping on its own: the files are of an
// exit save, ExitFileName, written beside this part's files of the last
// coordinated save instead of over them (the other nodes keep theirs of
// that save: replacing this node's would leave the cluster's checkpoint
// of two saves). A previous exit save of the part is replaced. A table
// whose files KeepFiles keeps is left out (checkpoint_keep.go): its files
// and exit file stay as they are. It returns what the files record.
func (s *Store) SaveExit(dir string) (SaveInfo, error) {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if _, err := recoverSave("save", dir, s.part); err != nil {
		return SaveInfo{}, err
	}
	info := SaveInfo{ID: NewSaveID(), Exit: true, Base: s.coordinatedInPlace(dir)}
	ents, snaps, err := s.writeAll(dir, info)
	if err != nil {
		return SaveInfo{}, err
	}
	if len(ents) == 0 {
		return info, nil // every table is left out (KeepFiles)
	}
	if committed, err := commitJournal(dir, s.part, ents, s.syncDir); err != nil {
		if !committed {
			removeTemps(dir, ents)
		}
		return SaveInfo{}, err
	}
	if err := applyJournal(dir, s.part, ents); err != nil {
		return SaveInfo{}, fmt.Errorf("kv: save: %w", err)
	}
	saved(dir, ents, snaps)
	return info, nil
}

// coordinatedOf is the save of table name's FileName file of part in
// dir: the save its exit file written now follows; 0 when there is none,
// or a legacy or unreadable one.
func coordinatedOf(dir, name string, part int) SaveID {
	info, ok, err := peekSave(filepath.Join(dir, FileName(name, part)))
	if err != nil || !ok || info.Exit {
		return 0
	}
	return info.ID
}

// coordinatedInPlace is the save of this part's FileName files in dir
// when they are all of one (0 otherwise, and for legacy files): what an
// exit save written now reports it follows (each table's file records
// its own, coordinatedOf). Tables the exit save leaves out (KeepFiles)
// are not counted. s.saveMu is held.
func (s *Store) coordinatedInPlace(dir string) SaveID {
	set := s.set.Load()
	id := SaveID(0)
	first := true
	for _, name := range set.names {
		if set.tables[name].keepFiles.Load() {
			continue
		}
		info, ok, err := peekSave(filepath.Join(dir, FileName(name, s.part)))
		if err != nil || !ok || info.Exit || (!first && info.ID != id) {
			return 0
		}
		id, first = info.ID, false
	}
	return id
}

// PreparedSave is Save cut in two, for a checkpoint of several nodes
// that must change on all of them or on none: PrepareSave writes every
// table to its temporary file and fsyncs it, which is where a save fails
// (a full disk), and puts nothing in place; Commit then puts the save in
// place as Save does, and Abort removes the temporaries, leaving the
// previous checkpoint whole. Until one of them is called the Store's
// other saves and loads wait, so the caller must end every PreparedSave.
type PreparedSave struct {
	s     *Store
	dir   string
	ents  []journalEntry
	snaps []savedTable // of ents[i]
	done  atomic.Bool
}

// Every file of a prepared save records its id: the coordinator's,
// the same on every node (see checkpoint_saveid.go).

// ErrSaveEnded is returned by Commit of a PreparedSave already committed
// or aborted.
var ErrSaveEnded = errors.New("kv: save already committed or aborted")

// PrepareSave is the first half of Save (see PreparedSave), of save id
// (not 0: every node of a coordinated save is given the same). It waits
// for a save or load of the store under way until ctx ends: two nodes
// preparing saves of each other at once then fail instead of waiting on
// each other for ever.
func (s *Store) PrepareSave(ctx context.Context, dir string, id SaveID) (*PreparedSave, error) {
	if id == 0 {
		return nil, fmt.Errorf("kv: save %s: save id 0 is the legacy save's: %w", dir, ErrSpec)
	}
	for wait := time.Millisecond; !s.saveMu.TryLock(); wait = min(2*wait, 50*time.Millisecond) {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("kv: save %s: waiting for another save or load of part %d to end: %w", dir, s.part, context.Cause(ctx))
		case <-t.C:
		}
	}
	if _, err := recoverSave("save", dir, s.part); err != nil {
		s.saveMu.Unlock()
		return nil, err
	}
	info := SaveInfo{ID: id}
	ents, snaps, err := s.writeAll(dir, info)
	if err != nil {
		s.saveMu.Unlock()
		return nil, err
	}
	return &PreparedSave{s: s, dir: dir, ents: ents, snaps: snaps}, nil
}

// Specs are the specs of the tables the prepared save writes, in name
// order: what the store held when PrepareSave ran, which a table created
// or dropped since does not change.
func (p *PreparedSave) Specs() []Spec {
	specs := make([]Spec, len(p.snaps))
	for i, sn := range p.snaps {
		specs[i] = sn.t.spec
		specs[i].Bounds = slices.Clone(sn.t.spec.Bounds)
	}
	return specs
}

// Commit puts a prepared save in place: its journal is committed, then
// the files renamed (see Save).
func (p *PreparedSave) Commit() error {
	if !p.done.CompareAndSwap(false, true) {
		return ErrSaveEnded
	}
	s := p.s
	defer s.saveMu.Unlock()
	if committed, err := commitJournal(p.dir, s.part, p.ents, s.syncDir); err != nil {
		if !committed {
			removeTemps(p.dir, p.ents)
			return uncommitted{err}
		}
		return err
	}
	if err := applyJournal(p.dir, s.part, p.ents); err != nil {
		return fmt.Errorf("kv: save: %w", err)
	}
	removeExitFiles(p.dir, s.part, p.ents)
	saved(p.dir, p.ents, p.snaps)
	return nil
}

// uncommitted is Commit's error when the save's journal could not be
// written: the checkpoint in place is the previous one.
type uncommitted struct{ error }

func (u uncommitted) Unwrap() error { return u.error }

// Uncommitted reports whether err is a PreparedSave.Commit that left the
// checkpoint in place as it was (its journal could not be written); any
// other error of Commit comes after the journal committed the save,
// which the next Save, Load or Recover finishes.
func Uncommitted(err error) bool {
	var u uncommitted
	return errors.As(err, &u)
}

// Abort removes a prepared save's temporary files; the checkpoint in
// place is left as it was. It does nothing after Commit or Abort.
func (p *PreparedSave) Abort() {
	if !p.done.CompareAndSwap(false, true) {
		return
	}
	removeTemps(p.dir, p.ents)
	p.s.saveMu.Unlock()
}

// savedTable is a table as a save wrote it: the table, its version and
// what its file records of the save (an exit file: its own table's
// coordinated save).
type savedTable struct {
	t       *table
	version uint64
	info    SaveInfo
}

// saved records, once a save is in place, that each table's rows were
// those of the save when written (Origin), as its file says. A
// coordinated save replaced the files that KeepFiles kept.
func saved(dir string, ents []journalEntry, snaps []savedTable) {
	for i, sn := range snaps {
		l := Loaded{Path: filepath.Join(dir, ents[i].final), Save: sn.info, Sync: sn.t.sync != nil, Version: sn.version}
		sn.t.origin.Store(&Origin{Loaded: l})
		if !sn.info.Exit {
			sn.t.keepFiles.Store(false)
		}
	}
}

// writeAll writes every table of s to its temporary file in dir and
// returns the journal entries that put them in place (FileName files,
// or ExitFileName ones for an exit save, which leaves out the tables
// whose files KeepFiles keeps) and what each file holds. On an error it
// removes the temporaries it wrote.
func (s *Store) writeAll(dir string, info SaveInfo) ([]journalEntry, []savedTable, error) {
	set := s.set.Load()
	ents := make([]journalEntry, 0, len(set.names))
	snaps := make([]savedTable, 0, len(set.names))
	for _, name := range set.names {
		t := set.tables[name]
		if info.Exit && t.keepFiles.Load() {
			continue
		}
		final := FileName(name, s.part)
		if info.Exit {
			final = ExitFileName(name, s.part)
		}
		ti := info
		if info.Exit {
			// The save this table's exit file follows is its own file's:
			// a table created since the last coordinated save has none,
			// and must not make the others' exit files look older than
			// theirs (Load would then take their coordinated files).
			ti.Base = coordinatedOf(dir, name, s.part)
		}
		tmp, v, err := t.write(dir, s.part, final, ti)
		if err != nil {
			removeTemps(dir, ents)
			return nil, nil, err
		}
		ents = append(ents, journalEntry{tmp: filepath.Base(tmp), final: final})
		snaps = append(snaps, savedTable{t, v, ti})
	}
	return ents, snaps, nil
}

// removeTemps removes the temporary files of ents.
func removeTemps(dir string, ents []journalEntry) {
	for _, e := range ents {
		os.Remove(filepath.Join(dir, e.tmp))
	}
}

// write writes t's shard of part, of save info, to a new temporary file
// in dir that replaces final, fsynced and closed, and returns its name
// and the version written.
func (t *table) write(dir string, part int, final string, info SaveInfo) (_ string, version uint64, err error) {
	path := filepath.Join(dir, final)
	f, err := os.CreateTemp(dir, tempPrefix(final)+"*")
	if err != nil {
		return "", 0, fmt.Errorf("kv: save %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			err = fmt.Errorf("kv: save %s: %w", path, err)
		}
	}()
	t.mu.Lock()
	err = t.writeLocked(f, part, info)
	version = t.version.Load() // the header's: no update runs under t.mu held
	t.mu.Unlock()
	if err != nil {
		return "", 0, err
	}
	if err := f.Sync(); err != nil {
		return "", 0, err
	}
	if err := f.Close(); err != nil {
		return "", 0, err
	}
	return f.Name(), version, nil
}

// writeLocked streams the header, body and body CRC. t.mu is held.
func (t *table) writeLocked(f io.Writer, part int, info SaveInfo) error {
	w := bufio.NewWriterSize(f, 1<<20)
	if _, err := w.Write(t.header(part, info)); err != nil {
		return err
	}
	crc := uint32(0)
	buf := make([]byte, 0, 1<<16)
	flush := func() error {
		crc = crc32.Update(crc, crcTable(), buf)
		_, err := w.Write(buf)
		buf = buf[:0]
		return err
	}
	for _, sec := range t.sections() {
		for i := range sec.n() {
			buf = le.AppendUint32(buf, sec.get(i))
			if len(buf) == cap(buf) {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if _, err := w.Write(le.AppendUint32(nil, crc)); err != nil {
		return err
	}
	return w.Flush()
}

// section is one array of the body, as 32-bit words in file order.
type section struct {
	f []float32
	u []uint32
}

func (s section) n() int {
	if s.f != nil {
		return len(s.f)
	}
	return len(s.u)
}

func (s section) get(i int) uint32 {
	if s.f != nil {
		return math.Float32bits(s.f[i])
	}
	return s.u[i]
}

func (s section) set(i int, x uint32) {
	if s.f != nil {
		s.f[i] = math.Float32frombits(x)
	} else {
		s.u[i] = x
	}
}

// sections lists the body in file order: rows, then the optimiser state.
func (t *table) sections() []section {
	secs := []section{{f: t.w}}
	switch t.spec.Opt.Kind {
	case OptAdagrad:
		secs = append(secs, section{f: t.acc})
	case OptAdam:
		secs = append(secs, section{f: t.m}, section{f: t.v}, section{u: t.steps})
	}
	return secs
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
