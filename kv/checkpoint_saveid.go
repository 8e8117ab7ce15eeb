package kv

import (
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Every checkpoint file records the save it belongs to (header bytes
// 172–192, minor version 1): a coordinated save (kv_save: every node's
// files of it carry the coordinator's id) or one node's exit save
// (SaveExit: an id of its own). A node's exit save is written beside its
// part of the last coordinated save (ExitFileName), never over it: the
// other nodes still hold theirs of that save. A node loads its exit save
// when it is newer than its coordinated one; the nodes then compare what
// they loaded (Loaded.Generation) and refuse a mix. A file of minor version 0
// has no save id: it is read as one legacy save (SaveInfo.ID 0).

// ErrMixedSaves: the checkpoint files to load are of different saves.
var ErrMixedSaves = errors.New("checkpoint files of different saves")

// Header fields of minor version 1.
const (
	ckSaveID  = 172 // save id, u64
	ckBaseID  = 180 // exit save: the coordinated save it follows, u64
	ckSaveCRC = 188 // CRC-32C of bytes [0, 188)
	flagExit  = 2   // an exit save (SaveExit)
)

// SaveID names a save; 0 is a file written before save ids.
type SaveID uint64

// String is the id as kv_save's coordinator writes it (16 hex digits),
// or "legacy".
func (id SaveID) String() string {
	if id == 0 {
		return "legacy"
	}
	return fmt.Sprintf("%016x", uint64(id))
}

// NewSaveID is a random save id, never 0.
func NewSaveID() SaveID {
	for {
		if id := SaveID(rand.Uint64()); id != 0 {
			return id
		}
	}
}

// ParseSaveID is the SaveID of a coordinated save's id as sent between
// nodes: 16 hex digits are read as such, any other text (an earlier
// build's, a test's) is hashed, so that every node derives the same id.
func ParseSaveID(s string) SaveID {
	if len(s) == 16 {
		if v, err := strconv.ParseUint(s, 16, 64); err == nil && v != 0 {
			return SaveID(v)
		}
	}
	h := fnv.New64a()
	h.Write([]byte(s))
	if v := h.Sum64(); v != 0 {
		return SaveID(v)
	}
	return 1
}

// SaveInfo is what a checkpoint file says of its save.
type SaveInfo struct {
	ID   SaveID // 0: a legacy file, written before save ids
	Exit bool   // one node's exit save (SaveExit), not a coordinated one
	Base SaveID // of an exit save: the coordinated save in place when it was written, 0 if none
}

func (i SaveInfo) String() string {
	switch {
	case i.ID == 0:
		return "legacy save (written before save ids)"
	case i.Exit && i.Base != 0:
		return fmt.Sprintf("exit save %s (after save %s)", i.ID, i.Base)
	case i.Exit:
		return fmt.Sprintf("exit save %s", i.ID)
	}
	return "save " + i.ID.String()
}

// ExitFileName is the checkpoint file of shard part of table written by
// an exit save.
func ExitFileName(table string, part int) string {
	return fmt.Sprintf("%s.part%d.exit.kvt", table, part)
}

// putSaveInfo fills the save fields of header h (ckHeaderLen bytes whose
// first CRC is written) and the flag of an exit save.
func putSaveInfo(h []byte, info SaveInfo) {
	if info.Exit {
		le.PutUint32(h[12:], le.Uint32(h[12:])|flagExit)
		le.PutUint32(h[ckHeaderCRC:], crc32.Checksum(h[:ckHeaderCRC], crcTable()))
	}
	le.PutUint64(h[ckSaveID:], uint64(info.ID))
	le.PutUint64(h[ckBaseID:], uint64(info.Base))
	le.PutUint32(h[ckSaveCRC:], crc32.Checksum(h[:ckSaveCRC], crcTable()))
}

// decodeSaveInfo reads and checks the save fields of header h, whose
// magic, major version and first CRC were checked. A minor version 0
// file is a legacy save: its bytes past the first CRC must be zero.
func decodeSaveInfo(h []byte) (SaveInfo, error) {
	flags := le.Uint32(h[12:])
	if le.Uint16(h[10:]) == 0 {
		for i, b := range h[ckHeaderCRC+4 : ckHeaderLen] {
			if b != 0 {
				return SaveInfo{}, fmt.Errorf("byte %d is %#x in a version 1.0 header (zero padding): %w", ckHeaderCRC+4+i, b, ErrCorrupt)
			}
		}
		if flags&flagExit != 0 {
			return SaveInfo{}, fmt.Errorf("flags %#x: an exit save in a version 1.0 header: %w", flags, ErrCorrupt)
		}
		return SaveInfo{}, nil
	}
	if got, want := le.Uint32(h[ckSaveCRC:]), crc32.Checksum(h[:ckSaveCRC], crcTable()); got != want {
		return SaveInfo{}, fmt.Errorf("save CRC %08x, computed %08x: %w", got, want, ErrCorrupt)
	}
	info := SaveInfo{ID: SaveID(le.Uint64(h[ckSaveID:])), Exit: flags&flagExit != 0, Base: SaveID(le.Uint64(h[ckBaseID:]))}
	if info.ID == 0 {
		return SaveInfo{}, fmt.Errorf("save id 0: %w", ErrCorrupt)
	}
	if !info.Exit && info.Base != 0 {
		return SaveInfo{}, fmt.Errorf("a coordinated save with a base save %s: %w", info.Base, ErrCorrupt)
	}
	return info, nil
}

// peekSave reads the save of the checkpoint file at path; ok is false
// when there is none. Every other check is load's.
func peekSave(path string) (info SaveInfo, ok bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return SaveInfo{}, false, nil
	} else if err != nil {
		return SaveInfo{}, false, fmt.Errorf("kv: load: %w", err)
	}
	defer f.Close()
	h := make([]byte, ckHeaderLen)
	fail := func(err error) (SaveInfo, bool, error) {
		return SaveInfo{}, false, fmt.Errorf("kv: load %s: %w", path, err)
	}
	if n, err := io.ReadFull(f, h); err != nil {
		return fail(fmt.Errorf("header: %d of %d bytes: %w", n, ckHeaderLen, ErrCorrupt))
	}
	if string(h[:8]) != ckMagic {
		return fail(fmt.Errorf("magic %q, want %q: %w", h[:8], ckMagic, ErrCorrupt))
	}
	if major := le.Uint16(h[8:]); major != CheckpointMajor {
		return fail(fmt.Errorf("major version %d, this build reads %d: %w", major, CheckpointMajor, ErrVersion))
	}
	if got, want := le.Uint32(h[ckHeaderCRC:]), crc32.Checksum(h[:ckHeaderCRC], crcTable()); got != want {
		return fail(fmt.Errorf("header CRC %08x, computed %08x: %w", got, want, ErrCorrupt))
	}
	info, err = decodeSaveInfo(h)
	if err != nil {
		return fail(err)
	}
	return info, true, nil
}

// Loaded is the checkpoint file a table was loaded from.
type Loaded struct {
	Path string
	Save SaveInfo
	// Sync: the table is synchronous, and Version the step it loaded at.
	// The exit saves of every node after one coordinated save agree only
	// at one step (a node killed mid-training stopped at another).
	Sync    bool
	Version uint64
}

// Generation is the key under which the nodes of a cluster compare
// what they loaded: a coordinated save's id; for an exit save, the
// coordinated save it follows ("exit after <id>"): the exit saves of
// every node stopped after one coordinated save are the cluster's
// shutdown checkpoint (DESIGN.md §10). "legacy": files without save ids.
func (l Loaded) Generation() string {
	if l.Save.Exit {
		return "exit after " + l.Save.Base.String()
	}
	return l.Save.ID.String()
}

// Origin is the checkpoint a table shard's rows last equalled in this
// process: the file they were loaded from (Load, LoadTable), or the
// last save of them this store put in place (Save, a committed
// PreparedSave, SaveExit); Path "" when no checkpoint: the initial rows
// (a new table, or one reset by a failed load). Version is the table's
// version then (Loaded's fields). The rows have changed since when the
// version has moved (Store.Origin): what a cluster must know of every
// node's shard before it serves them together, as a node that restarts
// and loads the last save beside peers that trained since would serve
// rows of two points of training.
type Origin struct {
	Loaded
	FromLoad bool // loaded from Path, not saved there
}

// Initial reports whether the rows are the table's initial ones (no
// checkpoint loaded or saved since the table was created).
func (o Origin) Initial() bool { return o.Path == "" }

// Origin reports table's Origin and whether its rows have changed since
// (an update applied: a push, a synchronous step).
func (s *Store) Origin(table string) (o Origin, changed bool, err error) {
	t, err := s.table(table)
	if err != nil {
		return Origin{}, false, err
	}
	o = *t.origin.Load()
	return o, t.version.Load() != o.Version, nil
}

// Loaded reports the checkpoint file table was last loaded from; ok is
// false when it holds rows of no checkpoint (never loaded, or reset).
func (s *Store) Loaded(table string) (Loaded, bool) {
	s.loadedMu.Lock()
	defer s.loadedMu.Unlock()
	l, ok := s.loaded[table]
	return l, ok
}

// pickFile chooses t's file to load from dir: this part's exit save
// when it is newer than its file of the last coordinated save (written
// after it, or there is none), that file otherwise. Whether every node
// picked the same generation (Loaded.Generation) is the caller's to
// check: an exit save of one node beside the others' coordinated save
// is refused there, not loaded silently.
func (t *table) pickFile(dir string, part int) (Loaded, error) {
	main := filepath.Join(dir, FileName(t.spec.Name, part))
	exit := filepath.Join(dir, ExitFileName(t.spec.Name, part))
	mi, mok, err := peekSave(main)
	if err != nil {
		return Loaded{}, err
	}
	ei, eok, err := peekSave(exit)
	if err != nil {
		// The newer checkpoint when it is whole: not passed over for the
		// older one without a word.
		if mok {
			return Loaded{}, fmt.Errorf("%w (the exit save beside %s, of %s; move it aside to load that save)", err, main, mi)
		}
		return Loaded{}, err
	}
	if !mok && !eok {
		_, err := os.Stat(main)
		return Loaded{}, fmt.Errorf("kv: load: %w", err)
	}
	if eok && (!mok || ei.Base == mi.ID) {
		return Loaded{Path: exit, Save: ei}, nil
	}
	return Loaded{Path: main, Save: mi}, nil
}

// removeExitFiles removes the exit saves of part's tables in dir that a
// coordinated save just superseded. Best effort: one left behind is
// older than the coordinated save (its base differs) and never loaded.
func removeExitFiles(dir string, part int, ents []journalEntry) {
	for _, e := range ents {
		if table, ok := strings.CutSuffix(e.final, fmt.Sprintf(".part%d.kvt", part)); ok {
			os.Remove(filepath.Join(dir, ExitFileName(table, part)))
		}
	}
}

// sameSave reports the files among ls that are not of the first one's
// save, as an ErrMixedSaves error naming every file and its save; nil
// when all are of one save.
func sameSave(ls []Loaded) error {
	// One node's files of one save: a coordinated save's id, or one exit
	// save's (its tables may follow different coordinated saves: one
	// created after the last has none).
	mixed := false
	for _, l := range ls[min(1, len(ls)):] {
		mixed = mixed || l.Save.ID != ls[0].Save.ID || l.Save.Exit != ls[0].Save.Exit
	}
	if !mixed {
		return nil
	}
	var b strings.Builder
	for i, l := range ls {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %s", l.Path, l.Save)
	}
	return fmt.Errorf("kv: load: %s: %w", b.String(), ErrMixedSaves)
}
