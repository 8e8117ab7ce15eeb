package kv

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A save is one atomic step for all tables of a part: Save writes every
// table to a temporary file, then commits a save journal naming each
// temporary file and the checkpoint file it replaces, then renames them
// into place and removes the journal. A crash before the journal is
// committed leaves the previous checkpoint whole (the temporaries are
// removed by the next Save, Load or Recover); a crash after it is rolled
// forward by them, so a checkpoint directory never holds some tables of
// one save and some of another.
//
// The journal, JournalName(part), is text:
//
//	graphnode kv save journal 1
//	part 3
//	.emb.part3.kvt.tmp-2718281828 emb.part3.kvt
//	...
//	crc32c 1f2e3d4c
//
// The CRC-32C covers every byte before the last line. It is written to
// JournalName(part)+".tmp", fsynced and renamed, so it exists whole or not
// at all; a journal that fails its checks is refused (ErrCorrupt), never
// guessed at, and so is one whose files show a temporary file lost rather
// than renamed (checkJournal): nothing is renamed then.

const journalHeader = "graphnode kv save journal 1\n"

// JournalName is the save journal of part, in the checkpoint directory.
func JournalName(part int) string { return fmt.Sprintf("part%d.kvsave", part) }

// journalEntry renames tmp to final (base names in the checkpoint dir).
type journalEntry struct{ tmp, final string }

// encodeJournal is the journal of part's entries.
func encodeJournal(part int, ents []journalEntry) []byte {
	b := []byte(journalHeader)
	b = fmt.Appendf(b, "part %d\n", part)
	for _, e := range ents {
		b = fmt.Appendf(b, "%s %s\n", e.tmp, e.final)
	}
	return fmt.Appendf(b, "crc32c %08x\n", crc32.Checksum(b, crcTable()))
}

// decodeJournal parses and checks a journal of part: its header, part,
// CRC, and that every entry renames a temporary file of this package to
// the checkpoint file of a table of part, each table once.
func decodeJournal(b []byte, part int) ([]journalEntry, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
	body, last, ok := cutLastLine(b)
	if !ok {
		return nil, bad("%d bytes without a final crc32c line", len(b))
	}
	if want := fmt.Sprintf("crc32c %08x", crc32.Checksum(body, crcTable())); last != want {
		return nil, bad("last line %q, computed %q", clip(last), want)
	}
	rest, ok := bytes.CutPrefix(body, []byte(journalHeader))
	if !ok {
		return nil, bad("first line is not %q", strings.TrimSpace(journalHeader))
	}
	lines := strings.Split(strings.TrimSuffix(string(rest), "\n"), "\n")
	if want := fmt.Sprintf("part %d", part); lines[0] != want {
		return nil, bad("line 2 %q, want %q", clip(lines[0]), want)
	}
	ents := make([]journalEntry, 0, len(lines)-1)
	seen := make(map[string]bool, len(lines)-1)
	for i, line := range lines[1:] {
		tmp, final, ok := strings.Cut(line, " ")
		if !ok || !isCheckpointName(final, part) || !isTempName(tmp, final) {
			return nil, bad("line %d %q: want a temporary file and the part %d checkpoint file it replaces", i+3, clip(line), part)
		}
		if seen[final] {
			return nil, bad("line %d: %s twice", i+3, final)
		}
		seen[final] = true
		ents = append(ents, journalEntry{tmp, final})
	}
	return ents, nil
}

// cutLastLine splits b before its last line, which must end with '\n'.
func cutLastLine(b []byte) (body []byte, last string, ok bool) {
	if len(b) == 0 || b[len(b)-1] != '\n' {
		return nil, "", false
	}
	i := bytes.LastIndexByte(b[:len(b)-1], '\n')
	return b[:i+1], string(b[i+1 : len(b)-1]), true
}

// clip shortens a line quoted in an error.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// isCheckpointName reports whether name is FileName(table, part) or
// ExitFileName(table, part) of a valid table name.
func isCheckpointName(name string, part int) bool {
	table, ok := strings.CutSuffix(name, fmt.Sprintf(".part%d.kvt", part))
	if !ok {
		table, ok = strings.CutSuffix(name, fmt.Sprintf(".part%d.exit.kvt", part))
	}
	return ok && validName(table)
}

// tempPrefix starts the temporary file that replaces checkpoint file final.
func tempPrefix(final string) string { return "." + final + ".tmp-" }

// isTempName reports whether name is a temporary file of final, as
// os.CreateTemp makes them from tempPrefix(final)+"*" (decimal digits).
func isTempName(name, final string) bool {
	digits, ok := strings.CutPrefix(name, tempPrefix(final))
	if !ok || digits == "" {
		return false
	}
	for _, c := range []byte(digits) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// commitJournal writes part's journal durably: a temporary file, fsync,
// rename, directory fsync (fsyncDir: syncDir, but in tests). From its
// rename on, the save is done whatever happens to this process, and
// committed reports it: the temporary files the journal names must then
// stay, even when the directory fsync fails, for the next Save, Load or
// Recover to rename them into place (removing them would leave a journal
// naming files that do not exist, refused as corrupt).
func commitJournal(dir string, part int, ents []journalEntry, fsyncDir func(dir string) error) (committed bool, err error) {
	path := filepath.Join(dir, JournalName(part))
	tmp := path + ".tmp"
	if err := writeSynced(tmp, encodeJournal(part, ents)); err != nil {
		os.Remove(tmp)
		return false, fmt.Errorf("kv: save %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return false, fmt.Errorf("kv: save %s: %w", path, err)
	}
	if err := fsyncDir(dir); err != nil {
		return true, fmt.Errorf("kv: save %s: committed, but %w; the next Save, Load or Recover finishes it", path, err)
	}
	return true, nil
}

// writeSynced creates path with b and fsyncs it.
func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// applyJournal renames the entries' temporary files into place, fsyncs
// dir and removes the journal. An entry whose temporary file is gone was
// renamed before (by a save that stopped half way); its checkpoint file
// must then exist (checkJournal).
func applyJournal(dir string, part int, ents []journalEntry) error {
	if err := checkJournal(dir, ents); err != nil {
		return err
	}
	for _, e := range ents {
		tmp, final := filepath.Join(dir, e.tmp), filepath.Join(dir, e.final)
		err := os.Rename(tmp, final)
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := os.Stat(tmp); errors.Is(serr, fs.ErrNotExist) {
				if _, ferr := os.Stat(final); ferr == nil {
					continue
				}
				err = fmt.Errorf("%w: the save journal names %s, and neither it nor %s exists", ErrCorrupt, e.tmp, e.final)
			}
		}
		if err != nil {
			return err
		}
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, JournalName(part))); err != nil {
		return err
	}
	return syncDir(dir)
}

// checkJournal checks, before anything is renamed, that the entries'
// files are those of a save renamed in journal order up to some entry:
// an entry whose temporary file is gone must have its checkpoint file,
// and no entry before it may still have its temporary file. Otherwise a
// temporary file was lost, not renamed, and finishing the save would
// leave that table's checkpoint of an earlier save among this save's.
func checkJournal(dir string, ents []journalEntry) error {
	pending := "" // the first entry whose temporary file is still there
	for _, e := range ents {
		_, err := os.Lstat(filepath.Join(dir, e.tmp))
		if err == nil {
			if pending == "" {
				pending = e.tmp
			}
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if pending != "" {
			return fmt.Errorf("%w: the save journal names %s, which is gone, while %s, named before it, is not yet renamed (they are renamed in journal order): %s is not of this save",
				ErrCorrupt, e.tmp, pending, e.final)
		}
		if _, err := os.Lstat(filepath.Join(dir, e.final)); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: the save journal names %s, and neither it nor %s exists", ErrCorrupt, e.tmp, e.final)
		} else if err != nil {
			return err
		}
	}
	return nil
}

// Recovered says what Recover found of an interrupted save.
type Recovered struct {
	// Finished lists the checkpoint files of a save that was committed
	// but not wholly renamed into place, now renamed.
	Finished []string
	// Removed lists temporary files of saves that never committed.
	Removed []string
}

// Recover finishes or undoes a save of this store's part in dir that a
// crash interrupted: a committed save journal is rolled forward, and
// temporary files no journal names are removed. Save and Load call it
// first; a node calls it at start to log what it did. A journal that
// fails its checks is refused with ErrCorrupt, naming it, and nothing is
// changed.
func (s *Store) Recover(dir string) (Recovered, error) {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	return recoverSave("recover", dir, s.part)
}

// recoverSave is Recover, for op (save, load or recover: the prefix of
// its errors).
func recoverSave(op, dir string, part int) (Recovered, error) {
	var rec Recovered
	jpath := filepath.Join(dir, JournalName(part))
	b, err := os.ReadFile(jpath)
	switch {
	case err == nil:
		ents, err := decodeJournal(b, part)
		if err != nil {
			return rec, fmt.Errorf("kv: %s: %s: %w", op, jpath, err)
		}
		if err := applyJournal(dir, part, ents); err != nil {
			return rec, fmt.Errorf("kv: %s: %s: %w", op, jpath, err)
		}
		for _, e := range ents {
			rec.Finished = append(rec.Finished, e.final)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return rec, fmt.Errorf("kv: %s: %w", op, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return rec, fmt.Errorf("kv: %s: %w", op, err)
	}
	for _, e := range ents {
		name := e.Name()
		if !isStaleTemp(name, part) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return rec, fmt.Errorf("kv: %s: %w", op, err)
		}
		rec.Removed = append(rec.Removed, name)
	}
	return rec, nil
}

// isStaleTemp reports whether name is a temporary file of a save of part:
// a table's or the journal's.
func isStaleTemp(name string, part int) bool {
	if name == JournalName(part)+".tmp" {
		return true
	}
	i := strings.LastIndex(name, ".tmp-")
	if i < 1 || name[0] != '.' {
		return false
	}
	final := name[1:i]
	return isCheckpointName(final, part) && isTempName(name, final)
}
