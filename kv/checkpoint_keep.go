package kv

import (
	"fmt"
	"slices"
)

// A table created over checkpoint files of the name's earlier table that
// it did not load (another number of rows, ErrResized: a model of
// another size saved under the name, which the caller replaces) has files
// that a coordinated save is yet to replace. Until one does, the files
// are the saved model: a load after a restart must find them as they
// were. An exit save of the table, whose file records the files'
// coordinated save as the one it follows, is newer than them, so
// pickFile took it over them: a node stopped between the create and the
// save (a trainer's store of the model refused, Ctrl-C) turned the saved
// model into the new table's initial rows, and a load at the earlier size
// was refused for good. So SaveExit leaves such a table out, and its
// files, and any exit file of the earlier table beside them, stay as they
// were. What the table learns before the coordinated save is lost when its
// node stops.

// KeepFiles says that table name was created over checkpoint files of
// the name's earlier table that it did not load: SaveExit leaves the
// table out until a coordinated save (Save, a PreparedSave's Commit)
// writes it, or a load restores it.
func (s *Store) KeepFiles(name string) error {
	t, err := s.table(name)
	if err != nil {
		return fmt.Errorf("kv: keep the checkpoint files of table %q: %w", name, err)
	}
	t.keepFiles.Store(true)
	return nil
}

// KeptFiles lists, in name order, the tables whose checkpoint files
// KeepFiles keeps: those SaveExit leaves out.
func (s *Store) KeptFiles() []string {
	set := s.set.Load()
	var names []string
	for _, name := range set.names {
		if set.tables[name].keepFiles.Load() {
			names = append(names, name)
		}
	}
	return slices.Clip(names)
}
