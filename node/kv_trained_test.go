package node

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"graphnode/node/control"
	"graphnode/partition"
)

// restartPart replaces part p of ss by a new node on its checkpoint
// directory, as after its process was killed (no exit save), with
// kv.load as load and tables as [[kv.tables]], wired to the other.
func restartPart(t *testing.T, ss [2]*kvServer, dirs [2]string, p int, load bool, tables ...control.TableSpec) [2]*kvServer {
	t.Helper()
	ss[p] = pairNode(t, dirs, p, load, tables...)
	wirePair(t, ss)
	return ss
}

// markAll is the markers' tick on both nodes.
func markAll(ss [2]*kvServer) {
	for _, s := range ss {
		s.syncMarkers()
	}
}

// marker is what part p's marker of table "w" holds ("" when none).
func marker(t *testing.T, dirs [2]string, p int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dirs[p], markerName("w", p)))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// served reports whether s serves table "w".
func served(s *kvServer) bool {
	_, err := s.store.Version("w")
	return err == nil
}

// startChecks runs a node's checks once its peers answer (awaitPeers).
func startChecks(s *kvServer) {
	s.checkLoadedAtStart(context.Background())
	s.checkLostAtStart(context.Background())
}

// savedAndTrained is a pair of nodes with kv.load that created table
// "w", trained and saved it (kv_save), and were restarted and loaded
// that save (kv_create); then the parts in trainAfter trained, and the
// markers' tick ran. It returns the rows of the save.
func savedAndTrained(t *testing.T, dirs [2]string, trainAfter ...int) ([2]*kvServer, control.TableSpec, [2][]float32) {
	t.Helper()
	ss, ts := coordinatedSaveLoad(t, dirs, true)
	var saved [2][]float32
	for p := range ss {
		saved[p], _ = shard(t, ss[p])
	}
	for p := range ss {
		ss = restartPart(t, ss, dirs, p, true)
	}
	if _, err := ss[0].create(context.Background(), &ts, true, false); err != nil {
		t.Fatal(err)
	}
	for _, p := range trainAfter {
		lo := uint64(5 * p)
		if err := ss[p].store.Push("w", []uint64{lo}, []float32{3, 3}); err != nil {
			t.Fatal(err)
		}
	}
	markAll(ss)
	return ss, ts, saved
}

// TestKVRestartLostTraining: node 1 is killed after its shard was
// trained since the last kv_save and restarted with kv.load: it loads
// its part of that save, while node 0 holds rows trained since. Served
// together they were a model no training produced (kge evaluated rows
// of two points of training without a word). kv_create now refuses the
// table, naming both shards, and drops it; created again, both nodes
// load the save and serve it.
func TestKVRestartLostTraining(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss, ts, saved := savedAndTrained(t, dirs, 0, 1)
	if m := marker(t, dirs, 1); !strings.HasSuffix(m, "\ntrained\n") {
		t.Fatalf("marker %q, want one of the training since the save", m)
	}
	ss = restartPart(t, ss, dirs, 1, true)
	ctx := context.Background()
	for asked := range 2 {
		_, err := ss[asked].create(ctx, &ts, true, false)
		for _, want := range []string{"lost the rows trained since", "trained its rows since", errLostTraining.Error(), "every node goes back to one point"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("kv_create on part %d after node 1 lost its training: error %v does not say %q", asked, err, want)
			}
		}
		for p := range ss {
			if served(ss[p]) {
				t.Fatalf("part %d serves the refused table", p)
			}
		}
		if asked == 0 {
			// The drop ended the mix. Each node's marker says the
			// drop of what its shard held (node 1's: what it lost),
			// which the next kv_create settles, every node at the
			// save. Node 0's shard is trained again and node 1's lost
			// once more, to refuse again from node 1.
			for p := range ss {
				if m := marker(t, dirs, p); !strings.HasPrefix(m, droppedTag) || !strings.HasSuffix(m, "\ntrained\n") {
					t.Fatalf("part %d's marker %q after the table was dropped, want a dropped one of rows trained since the save", p, m)
				}
			}
			ss, _, saved = savedAndTrained(t, dirs, 0, 1)
			ss = restartPart(t, ss, dirs, 1, true)
		}
	}
	if _, err := ss[1].create(ctx, &ts, true, false); err != nil {
		t.Fatalf("kv_create once both nodes load the save: %v", err)
	}
	for p := range ss {
		rows, _ := shard(t, ss[p])
		if !slices.Equal(rows, saved[p]) {
			t.Errorf("part %d: rows %v, want the save's %v", p, rows, saved[p])
		}
	}
}

// TestKVRestartUntouchedShard: a node killed when no trainer had
// touched its shard since the kv_save lost nothing: restarted with
// kv.load, it serves the save beside its peer's rows trained since, as
// one point of training.
func TestKVRestartUntouchedShard(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss, ts, _ := savedAndTrained(t, dirs, 0)
	if m := marker(t, dirs, 1); !strings.HasSuffix(m, "\nheld\n") {
		t.Fatalf("marker %q of an untouched shard, want one saying it holds the save", m)
	}
	ss = restartPart(t, ss, dirs, 1, true)
	if _, err := ss[0].create(context.Background(), &ts, true, false); err != nil {
		t.Fatalf("kv_create: %v", err)
	}
}

// TestKVRestartLostTrainingAtStart: a table of [[kv.tables]] is loaded
// at start, before any kv_create: node 1, restarted after losing its
// training, drops it on every node once its peer answers, and so does a
// node restarted without kv.load, whose initial rows lost the training
// since they were created. A whole cluster back at the save (every node
// restarted) serves it, and the markers are gone.
func TestKVRestartLostTrainingAtStart(t *testing.T) {
	ctx := context.Background()
	for _, load := range []bool{true, false} {
		dirs := [2]string{t.TempDir(), t.TempDir()}
		var ss [2]*kvServer
		_, ts := kvPair(t, dirs, false)
		for p := range ss {
			ss = restartPart(t, ss, dirs, p, false, ts) // no checkpoint to load yet
		}
		if load {
			// Saved, then every node restarted and loaded the save.
			train(t, ss, 1)
			if _, err := ss[0].save(ctx, true); err != nil {
				t.Fatal(err)
			}
			for p := range ss {
				ss = restartPart(t, ss, dirs, p, true, ts)
			}
			for p := range ss {
				startChecks(ss[p])
			}
		}
		train(t, ss, 2)
		markAll(ss)
		ss = restartPart(t, ss, dirs, 1, load, ts)
		startChecks(ss[1])
		if served(ss[1]) {
			t.Fatalf("load %v: node 1 serves the table whose training it lost beside node 0's trained rows", load)
		}
		if served(ss[0]) {
			// Serving it alone, node 0 would save it alone: the nodes'
			// checkpoints would be of two saves for good.
			t.Fatalf("load %v: node 0 serves the table node 1 refused", load)
		}

		// Every node restarted: all back at the save (or the initial
		// rows), the same point of training.
		for p := range ss {
			ss = restartPart(t, ss, dirs, p, load, ts)
		}
		for p := range ss {
			startChecks(ss[p])
		}
		for p := range ss {
			if !served(ss[p]) {
				t.Fatalf("load %v: part %d left out the table after the whole cluster restarted", load, p)
			}
			ss[p].syncMarkers()
			want := "" // the initial rows, untrained
			if load {
				want = "\nheld\n"
			}
			if m := marker(t, dirs, p); want == "" && m != "" || !strings.HasSuffix(m, want) {
				t.Errorf("load %v: part %d's marker %q once every node is back at the save, want it to say it holds it", load, p, m)
			}
		}
	}
}

// TestKVMarkerCorrupt: a marker file that is not one line names itself.
func TestKVMarkerCorrupt(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	path := filepath.Join(dirs[0], markerName("w", 0))
	if err := os.WriteFile(path, []byte("a\nb\n"), 0o644); err != nil { // neither trained nor held
		t.Fatal(err)
	}
	cfg := &Config{KV: KVConfig{CheckpointDir: dirs[0], SyncTimeout: "5s"}}
	_, err := newKVServer(cfg, slog.New(slog.DiscardHandler), partition.Book{Bounds: []uint64{0, 5, 10}}, numbering{})
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("start with a corrupt marker: %v", err)
	}
}

// TestKVRestartAfterASave: a cluster that started afresh (no checkpoint
// to load) trained and saved (kv_save); node 1 is then killed and
// restarted with kv.load, and loads that save, which node 0 never
// loaded but wrote. The save check, comparing what each node loaded,
// refused this as "different saves" (and said to move exit saves aside,
// which there are none of); the nodes now accept a save the other
// held since its start, and the check of lost training decides: node 1
// lost nothing (no trainer touched its shard since, or none trained at
// all) and is served, or it lost its training and is refused saying so.
func TestKVRestartAfterASave(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name       string
		trainAfter []int
		noLoad     bool   // node 1 restarted without kv.load: its initial rows
		lost       string // what the refusal says; "" when served
	}{
		{"no training since", nil, false, ""},
		{"node 0 trained since", []int{0}, false, ""},
		{"both trained since", []int{0, 1}, false, "lost the rows trained since"},
		// Without kv.load node 1 serves its initial rows, though it held
		// the save: nothing compared it (no node loaded anything).
		{"without kv.load", nil, true, "lost what it held when its node last stopped (save "},
		{"without kv.load, trained since", []int{1}, true, " and rows trained since)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dirs := [2]string{t.TempDir(), t.TempDir()}
			ss, ts := coordinatedSaveLoad(t, dirs, true)
			saved, _ := shard(t, ss[1])
			for _, p := range c.trainAfter {
				lo := uint64(5 * p)
				if err := ss[p].store.Push("w", []uint64{lo}, []float32{3, 3}); err != nil {
					t.Fatal(err)
				}
			}
			markAll(ss)
			ss = restartPart(t, ss, dirs, 1, !c.noLoad)
			_, err := ss[0].create(ctx, &ts, true, false)
			if c.lost == "" {
				if err != nil {
					t.Fatalf("kv_create: %v", err)
				}
				if rows, _ := shard(t, ss[1]); !slices.Equal(rows, saved) {
					t.Fatalf("node 1 serves %v, want the save's %v", rows, saved)
				}
				train(t, ss, 1)
				if _, err := ss[0].save(ctx, true); err != nil {
					t.Fatalf("kv_save after the restart: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.lost) || strings.Contains(err.Error(), "different saves") {
				t.Fatalf("kv_create after node 1 lost what it held: %v, want %q", err, c.lost)
			}
		})
	}
}

// TestKVKnownSavesBounded: the saves a shard held, which every save check
// carries (check_known), are the last maxKnownSaves, newest kept: they
// grew by one per kv_save for the life of a node.
func TestKVKnownSavesBounded(t *testing.T) {
	ctx := context.Background()
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss, _ := coordinatedSaveLoad(t, dirs, true)
	for range maxKnownSaves + 4 {
		train(t, ss, 1)
		if _, err := ss[0].save(ctx, true); err != nil {
			t.Fatal(err)
		}
		markAll(ss)
	}
	for p, s := range ss {
		o, _, err := s.store.Origin("w")
		if err != nil {
			t.Fatal(err)
		}
		known := s.knownSaves("w")
		if len(known) != maxKnownSaves || known[len(known)-1] != originKey(o) || !s.knows("w", originKey(o)) {
			t.Fatalf("node %d knows %d saves, newest %q; want %d, newest %q (its last save)", p, len(known), known[len(known)-1], maxKnownSaves, originKey(o))
		}
		if slices.Contains(known, "none") || len(slices.Compact(slices.Sorted(slices.Values(known)))) != len(known) {
			t.Fatalf("node %d knows %v: a save twice, or none", p, known)
		}
	}
}
