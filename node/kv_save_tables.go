package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"graphnode/kv"
	"graphnode/node/control"
)

// A coordinated save is one save of the same tables on every node: each
// node's prepare writes the tables its store holds, and a node that does
// not hold one (restarted since a trainer's kv_create made it, without
// [[kv.tables]] or kv.load bringing it back) writes no file of it. Saved
// anyway, the nodes that hold it replace their files of the last save by
// the new one's while that node keeps its file of the last: no save of
// the table is then on every node, and kv.load refuses the mix, or finds
// no file of it on that node: the trained table is lost. So every peer's
// prepare answers the tables it prepared (saveAnswer), the coordinator
// compares them with its own before any commit, and when they differ
// aborts the save on every node, which keeps the checkpoint it had.
//
// A node lacks a table for one of three reasons, which call for
// different fixes. Its node restarted since the table was made, without
// loading it: the rows it held are gone, and a kv_create of it there
// starts from its initial rows beside the others' trained ones (the
// check of lost training then drops the table on every node), so every
// node must go back to the last save. Or a kv_create failed part-way (a
// node unreachable) and left the table on some nodes only: the nodes that
// lack it never held rows of it but its initial ones, and the same
// kv_create again creates it there and keeps the others' rows. Or a
// kv_drop failed part-way and removed the shards of some nodes, which
// held trained rows, and not the others': kv_drop again ends it, where a
// kv_create would give those nodes initial rows beside the others'
// trained ones (which the check of lost training refuses, as after a
// restart). The marker of what a shard held (kv_trained.go) tells them
// apart: so each prepare also answers the tables the node lacks while a
// marker says it held rows of them (saveAnswer.Marked), and of those the
// ones a kv_drop removed (saveAnswer.Dropped). A drop of a shard that
// held only its initial rows leaves no marker: kv_create again is then
// right, and so is kv_drop.
//
// The answer is a JSON body, as the request is: a node of an earlier
// build neither asks for it (its prepare has no list_tables) nor sends
// one (it answers an Ack); its tables are then not compared, with a
// warning, as before. The same answer, from the coordinator, tells the
// node that forwarded a trainer's kv_save (phase "coordinate") which
// tables every node saved.

// errSaveTables: the nodes asked to save hold different tables.
var errSaveTables = errors.New("the nodes hold different tables")

// saveAnswer answers a prepare, or a coordinate, whose request asked for
// it (peerSaveRequest.ListTables): the tables the node prepared, or that
// every node saved.
type saveAnswer struct {
	Tables []preparedTable `json:"saved_tables"`
	// Marked, of a prepare, names the tables the node holds no shard of
	// while a marker says its shard held rows of them but its initial
	// ones (markedTables): [] when there is none; nil (null, or absent:
	// a node of an earlier build, which does not say) in other answers.
	Marked []string `json:"marked_tables"`
	// Dropped, of a prepare, names those of Marked whose marker says a
	// kv_drop removed the shard (markerState.Dropped): [] when there is
	// none; nil in other answers and from a build before dropped
	// markers, which reads only Marked (and takes them for shards lost
	// in a restart).
	Dropped []string `json:"dropped_tables"`
}

// preparedTable is a table of a save: its name and enough of its spec to
// tell a table dropped and created again with another shape, mode or
// optimiser on some nodes from the one the others hold.
type preparedTable struct {
	Name      string `json:"name"`
	Rows      uint64 `json:"rows"`
	Dim       int    `json:"dim"`
	Mode      string `json:"mode"`
	Optimizer string `json:"optimizer"`
}

// preparedTables describes the tables of specs.
func preparedTables(specs []kv.Spec) []preparedTable {
	ts := make([]preparedTable, len(specs)) // "saved_tables": [], not null, with none
	for i := range specs {
		sp := &specs[i]
		ts[i] = preparedTable{Name: sp.Name, Rows: sp.Rows, Dim: sp.Dim, Mode: sp.Mode.String(), Optimizer: sp.Opt.Kind.String()}
	}
	return ts
}

// tableNames are the names of ts, never nil ("tables": [] in an answer).
func tableNames(ts []preparedTable) []string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return names
}

// shape says a table's spec in an error.
func (t preparedTable) shape() string {
	return fmt.Sprintf("%d rows × %d, %s, %s", t.Rows, t.Dim, t.Mode, t.Optimizer)
}

// saveAnswerOf decodes a peer's answer to a prepare or coordinate that
// asked for its tables: listed is false when it is an Ack (a node of an
// earlier build), and the error is the peer's when it failed.
func saveAnswerOf(part int, resp []byte) (a saveAnswer, listed bool, err error) {
	if len(resp) == 0 || resp[0] != '{' {
		return saveAnswer{}, false, ackError(part, resp)
	}
	if err := json.Unmarshal(resp, &a); err != nil {
		return saveAnswer{}, false, fmt.Errorf("node: kv_save answer of part %d: %v: %w", part, err, kv.ErrMalformed)
	}
	return a, true, nil
}

// partTables are the tables a node prepared, those it lacks while a
// marker says it held rows of them (nil: it did not say), and of those
// the ones a kv_drop removed (nil: none, or it did not say).
type partTables struct {
	part    int
	tables  []preparedTable
	marked  []string
	dropped []string
}

// markedTables names the tables this node holds no shard of, none of
// held, while its marker of one (of a previous run, of a table left out
// since, or of one a kv_drop removed) says its shard held rows of it but
// its initial ones; dropped names those whose marker says a kv_drop
// removed the shard. Neither is nil: an empty list says there is none.
func (s *kvServer) markedTables(held []kv.Spec) (marked, dropped []string) {
	seen := map[string]bool{}
	for _, sp := range held {
		seen[sp.Name] = true
	}
	marked, dropped = []string{}, []string{}
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			marked = append(marked, name)
		}
	}
	s.markMu.Lock()
	for name, text := range s.mark.onDisk {
		if text != "" {
			add(name)
		}
	}
	for name := range s.mark.prev {
		add(name)
	}
	for _, name := range marked {
		if s.mark.prev[name].Dropped {
			dropped = append(dropped, name)
		}
	}
	s.markMu.Unlock()
	slices.Sort(marked)
	slices.Sort(dropped)
	return marked, dropped
}

// compareSaveTables returns an errSaveTables error naming, per table,
// the parts that do not hold it and those that hold it with another
// spec, and what to do; nil when every node of nodes prepared the same.
func compareSaveTables(nodes []partTables) error {
	held := map[string]map[preparedTable][]int{} // table → spec → parts
	for _, n := range nodes {
		for _, t := range n.tables {
			if held[t.Name] == nil {
				held[t.Name] = map[preparedTable][]int{}
			}
			held[t.Name][t] = append(held[t.Name][t], n.part)
		}
	}
	var diffs []string
	var created, lost, dropped, unknown []string // tables some parts lack, by what those say of them (lackedBy)
	specs := false
	for _, name := range slices.Sorted(maps.Keys(held)) {
		bySpec := held[name]
		var holders, without []int
		for _, ps := range bySpec {
			holders = append(holders, ps...)
		}
		for _, n := range nodes {
			if !slices.Contains(holders, n.part) {
				without = append(without, n.part)
			}
		}
		slices.Sort(holders)
		var d []string
		if len(without) > 0 {
			switch lackedBy(nodes, without, name) {
			case lackNeverHeld:
				created = append(created, name)
			case lackLost:
				lost = append(lost, name)
			case lackDropped:
				dropped = append(dropped, name)
			default:
				unknown = append(unknown, name)
			}
			d = append(d, fmt.Sprintf("%s hold%s no shard of it (%s do%s)", PartsText(without), verbS(without), PartsText(holders), esS(holders)))
		}
		if len(bySpec) > 1 {
			specs = true
			var as []string
			for _, t := range slices.SortedFunc(maps.Keys(bySpec), func(a, b preparedTable) int { return bySpec[a][0] - bySpec[b][0] }) {
				ps := bySpec[t]
				slices.Sort(ps)
				as = append(as, fmt.Sprintf("%s hold%s it as %s", PartsText(ps), verbS(ps), t.shape()))
			}
			d = append(d, strings.Join(as, ", "))
		}
		if len(d) > 0 {
			diffs = append(diffs, fmt.Sprintf("table %q: %s", name, strings.Join(d, "; ")))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	var fix []string
	if len(created)+len(lost)+len(dropped)+len(unknown) > 0 {
		fix = append(fix, "If a kv_create or kv_drop of a table ran during this save, run kv_save again")
	}
	if len(created) > 0 {
		fix = append(fix, fmt.Sprintf("Otherwise no part without a shard of %s held rows of it but its initial ones: "+
			"a kv_create of it failed part-way (a node unreachable, say) and left it on some nodes only, or a kv_drop did that removed only initial rows: "+
			"run kv_create for %s again, with the spec it was created with (it creates the table where it is missing and keeps the rows of the nodes that hold it), or kv_drop it", tablesText(created), tablesText(created)))
	}
	if len(dropped) > 0 {
		fix = append(fix, fmt.Sprintf("Otherwise a kv_drop of %s failed part-way: it removed the shards of the parts without one, which held rows of it but their initial ones, and not the others': %s",
			tablesText(dropped), droppedShardFix))
	}
	if len(lost) > 0 {
		fix = append(fix, fmt.Sprintf("Otherwise a part without a shard of %s held rows of it, which it holds no more (its node restarted since, without loading it): %s", tablesText(lost), lostShardFix))
	}
	if len(unknown) > 0 {
		fix = append(fix, fmt.Sprintf("Otherwise, of %s, a part of an earlier build does not say whether it held rows. "+
			"If no part without a shard of it held any but its initial ones (a kv_create of it failed part-way, a node unreachable, say, and left it on some nodes only), "+
			"run kv_create for it again, with the spec it was created with, or kv_drop it. If one did, it holds them no more (its node restarted since, without loading it, or a kv_drop of it failed part-way, which kv_drop again finishes): %s",
			tablesText(unknown), lostShardFix))
	}
	if specs {
		fix = append(fix, "A table held with different specs was created again with another on some nodes (their [[kv.tables]]): "+
			"give every node the same spec, or kv_drop the table and create it again")
	}
	return fmt.Errorf("nothing saved (every node keeps its checkpoint): %w, and each node saving its own would leave no save of them loadable on every node: %s. %s",
		errSaveTables, strings.Join(diffs, "; "), strings.Join(fix, ". "))
}

// lostShardFix says how to serve again a table whose shard a node lost.
const lostShardFix = "restart every node with [kv] load = true and kv_create the table, and each loads its files of the last save, which this refusal left in place " +
	"(or its exit save, when it stopped on its own since); a kv_create of it without kv.load gives that part its initial rows: " +
	"its rows are lost there, the check of lost training refuses them beside the others' trained ones, " +
	"and the table created again starts from its initial rows on every node. A table no longer wanted: kv_drop it"

// droppedShardFix says how to end a kv_drop that failed part-way.
const droppedShardFix = "kv_drop it again, which removes it from every node. Do not run kv_create for it: that would give those parts its initial rows " +
	"beside the others' trained ones, rows no training produced (the check of lost training refuses them and drops the table on every node). " +
	"To keep the table instead, restart every node with [kv] load = true and kv_create it: each loads its files of the last save, which this refusal left in place, " +
	"and what was trained since is lost"

// Why the parts without a shard of a table lack it (lackedBy).
const (
	lackUnknown   = iota // a part of an earlier build does not say
	lackNeverHeld        // none lost rows of it (none has a marker of it)
	lackLost             // one held rows of it (its marker says so)
	lackDropped          // a kv_drop removed one's rows (its marker says so)
)

// lackedBy says why the parts without, of nodes, hold no shard of table
// name: a kv_drop's removal of rows first (kv_drop again finishes it,
// whatever else lost rows), then a loss, then a part that does not say.
func lackedBy(nodes []partTables, without []int, name string) int {
	why := lackNeverHeld
	for _, n := range nodes {
		switch {
		case !slices.Contains(without, n.part):
		case slices.Contains(n.dropped, name):
			return lackDropped
		case slices.Contains(n.marked, name):
			why = lackLost
		case n.marked == nil && why == lackNeverHeld:
			why = lackUnknown
		}
	}
	return why
}

// tablesText names tables in an error: `table "w"`, `tables "v", "w"`.
func tablesText(names []string) string {
	q := make([]string, len(names))
	for i, name := range names {
		q[i] = strconv.Quote(name)
	}
	if len(names) == 1 {
		return "table " + q[0]
	}
	return "tables " + strings.Join(q, ", ")
}

// PartsText names parts in a message: "part 1", "parts 0, 2" (node kv
// drop's answer says the parts the same way).
func PartsText(parts []int) string {
	s := make([]string, len(parts))
	for i, p := range parts {
		s[i] = strconv.Itoa(p)
	}
	if len(parts) == 1 {
		return "part " + s[0]
	}
	return "parts " + strings.Join(s, ", ")
}

// verbS is the "s" of a verb whose subject is PartsText(parts).
func verbS(parts []int) string {
	if len(parts) == 1 {
		return "s"
	}
	return ""
}

// esS is the "es" of "do" whose subject is PartsText(parts).
func esS(parts []int) string {
	if len(parts) == 1 {
		return "es"
	}
	return ""
}

// preparePeers asks every peer to prepare save id and returns the tables
// each prepared; a peer of an earlier build, which does not say, is left
// out with a warning. The error names each part that failed.
func (s *kvServer) preparePeers(ctx context.Context, id string) ([]partTables, error) {
	body, err := json.Marshal(peerSaveRequest{Op: control.OpKVSave, Phase: savePrepare, Save: id, Coordinated: true, ListTables: true})
	if err != nil {
		return nil, err
	}
	n := len(s.peers())
	nodes := make([]partTables, n)
	listed := make([]bool, n)
	ps, err := s.sendAll(ctx, body, func(i, p int, resp []byte) error {
		a, ok, err := saveAnswerOf(p, resp)
		nodes[i], listed[i] = partTables{part: p, tables: a.Tables, marked: a.Marked, dropped: a.Dropped}, ok
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []partTables
	for i, p := range ps {
		if !listed[i] {
			s.log.Warn("kv save: a peer of an earlier build does not say which tables it prepared: not compared with this node's", "part", p, "save", id)
			continue
		}
		out = append(out, nodes[i])
	}
	return out, nil
}

// heldTables are the tables this node holds (a client node: those it
// has clients of), by name alone: what a kv_save answered before the
// coordinator said what it saved.
func (s *kvServer) heldTables() []preparedTable {
	var names []string
	if s.store != nil {
		names = s.store.Tables()
	} else {
		s.mu.Lock()
		names = slices.Sorted(maps.Keys(s.clients))
		s.mu.Unlock()
	}
	ts := make([]preparedTable, len(names))
	for i, name := range names {
		ts[i].Name = name
	}
	return ts
}
