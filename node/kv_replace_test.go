package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"graphnode/kv"
	"graphnode/node/control"
)

// TestKVReplaceResizedExitSave: nodes stopped (SIGTERM: their exit
// saves) after a replace_resized kv_create and before any kv_save keep
// the saved table's files as they were, whether or not the new table
// was trained meanwhile: restarted with kv.load, a kv_create at the
// saved size loads the saved rows on every node, and one at the new
// size is refused by the files as before the replace. The exit save
// wrote the new table's rows to <table>.part<K>.exit.kvt, whose base is
// the files' save: it was loaded over them, the saved table could not
// be created at its size any more, and at the new size it held the
// initial rows as if loaded. Once a kv_save writes the new table, the
// exit save writes it again.
func TestKVReplaceResizedExitSave(t *testing.T) {
	for _, trained := range []bool{false, true} {
		name := "untrained"
		if trained {
			name = "trained"
		}
		t.Run(name, func(t *testing.T) {
			dirs := [2]string{t.TempDir(), t.TempDir()}
			ss, ts := coordinatedSaveLoad(t, dirs, true)
			var saved [2][]float32
			var savedV [2]uint64
			for p := range ss {
				saved[p], savedV[p] = shard(t, ss[p])
			}
			markAll(ss)
			for p := range ss {
				ss = restartPart(t, ss, dirs, p, true)
			}
			ctx := context.Background()
			small := ts
			small.Rows = control.Rows{N: 6}
			if _, err := ss[0].create(ctx, &small, true, true); err != nil {
				t.Fatalf("kv_create of 6 rows with replace_resized: %v", err)
			}
			if trained {
				for p, s := range ss {
					if err := s.store.Push("w", []uint64{uint64(3 * p)}, []float32{-1, -2}); err != nil {
						t.Fatal(err)
					}
				}
			}
			stop := func() {
				t.Helper()
				for p, s := range ss {
					info, err := s.save(ctx, false)
					if err != nil {
						t.Fatalf("part %d's exit save: %v", p, err)
					}
					if len(info.Tables) != 0 {
						t.Errorf("part %d's exit save wrote %v, want the replaced table left out", p, info.Tables)
					}
					if _, err := os.Stat(filepath.Join(dirs[p], kv.ExitFileName("w", p))); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("part %d's exit save of the replaced table: %v, want no exit file", p, err)
					}
				}
			}
			stop()
			for p := range ss {
				ss = restartPart(t, ss, dirs, p, true)
			}
			if _, err := ss[0].create(ctx, &small, true, false); !errors.Is(err, kv.ErrMismatch) || !strings.Contains(err.Error(), "field rows: file has 10, table has 6") {
				t.Fatalf("kv_create of 6 rows over the saved 10 after the exit saves: %v, want the files refused as before the replace", err)
			}
			if info, err := ss[0].create(ctx, &ts, true, false); err != nil || info.Version != savedV[0] {
				t.Fatalf("kv_create of the saved 10 rows after the exit saves: %+v, %v; want the save loaded (version %d)", info, err, savedV[0])
			}
			for p := range ss {
				if rows, v := shard(t, ss[p]); !slices.Equal(rows, saved[p]) || v != savedV[p] {
					t.Errorf("part %d loaded %v at version %d, want the saved %v at %d", p, rows, v, saved[p], savedV[p])
				}
			}

			// Replaced and saved: the exit save writes the table again.
			if _, err := ss[0].drop(ctx, "w", true); err != nil {
				t.Fatal(err)
			}
			if _, err := ss[0].create(ctx, &small, true, true); err != nil {
				t.Fatal(err)
			}
			if _, err := ss[0].save(ctx, true); err != nil {
				t.Fatalf("kv_save of the replaced table: %v", err)
			}
			for p, s := range ss {
				if info, err := s.save(ctx, false); err != nil || !slices.Equal(info.Tables, []string{"w"}) {
					t.Errorf("part %d's exit save after the kv_save: %+v, %v; want table w written", p, info, err)
				}
				if _, err := os.Stat(filepath.Join(dirs[p], kv.ExitFileName("w", p))); err != nil {
					t.Errorf("part %d's exit file after the kv_save: %v", p, err)
				}
			}
		})
	}
}
