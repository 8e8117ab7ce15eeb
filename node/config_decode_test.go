package node

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// TestLoadConfigReportsEveryWrongType: toml.Decode stops at the first
// value of the wrong type; LoadConfig reports each of them, with its key
// and line, beside the unknown keys and the problems of the values of the
// right type, and leaves out the problems that only judge a refused
// value's zero.
func TestLoadConfigReportsEveryWrongType(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, `version = "1"
[node]
parts = "`+dir+`"
part = "0"
[control]
socket = "`+dir+`/node.sock"
[samplers]
workers = "2"
concurrency = 3
wrkers = 1
[log]
level = 4
format = "xml"
[mesh]
certs = "`+dir+`"
cluster = "c"
timeout = "5s"
[[mesh.peers]]
part = 0
name = "a"
addr = "127.0.0.1:7000"
[[mesh.peers]]
part = "1"
name = "b"
addr = "127.0.0.1:7001"
[[kv.tables]]
name = "ent"
rows = 10
dim = "8"
optimizer = "sgd"
mode = "sync"
[metrics]
listen = ["127.0.0.1:9464"]
`)
	cfg, err := LoadConfig(path)
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("err = %v, want ErrConfig", err)
	}
	want := []string{
		`unknown key "samplers.wrkers"`,
		`version: line 1: want an integer, not the string "1"`,
		`node.part: line 4: want an integer, not the string "0"`,
		`samplers.workers: line 8: want an integer, not the string "2"`,
		`log.level: line 12: want a string, not the integer 4`,
		`mesh.peers[1].part: want an integer, not the string "1"`,
		`kv.tables[0].dim: want an integer, not the string "8"`,
		// A problem of its own, not of the refused dim: said too.
		`kv.tables[0].lr: table "ent": missing or 0 for optimizer sgd: want a step size > 0`,
		`metrics.listen: line 33: want a string, not an array`,
		`log.format: "xml" is not one of text, json, auto`,
	}
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, path+": ")
	}
	for _, w := range want {
		found := false
		for _, l := range lines {
			found = found || l == w
		}
		if !found {
			t.Errorf("no problem %q in:\n%s", w, strings.Join(lines, "\n"))
		}
	}
	// Nothing else: no "version 0 is not supported", no "samplers.workers:
	// 0 is out of range", no complaint about the peers checked against
	// the refused node.part or about the kv table holding a refused
	// value. The directory has neither graph.toml nor certificates, and
	// those problems stay.
	for _, l := range lines {
		if !slices.Contains(want, l) && !strings.HasPrefix(l, "mesh.certs: ") && !strings.HasPrefix(l, "node.parts: ") {
			t.Errorf("unexpected problem %q", l)
		}
	}
	// The values of the right type are kept.
	if cfg.Samplers.Concurrency != 3 || cfg.Log.Format != "xml" || cfg.Mesh.Timeout != "5s" || len(cfg.Mesh.Peers) != 2 || cfg.Mesh.Peers[1].Addr != "127.0.0.1:7001" || len(cfg.KV.Tables) != 1 || cfg.KV.Tables[0].Rows.N != 10 {
		t.Errorf("kept values: %+v", cfg)
	}
}

// TestLoadConfigWrongTypeOfTable: a key that should be a table and is a
// value is one problem, and the keys of that table are not reported
// missing.
func TestLoadConfigWrongTypeOfTable(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, `version = 1
node = 5
samplers = "many"
[control]
socket = "`+dir+`/node.sock"
`)
	_, err := LoadConfig(path)
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("err = %v, want ErrConfig", err)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], ": node: line 2: ") || !strings.Contains(lines[1], ": samplers: line 3: ") {
		t.Errorf("problems:\n%s\nwant node and samplers, each with its line, and nothing about their keys", err)
	}
}

// TestValueDecoderMatchesDecode: on files toml.Decode takes, decoding
// value by value gives the same Config and the same unknown keys, so the
// two paths of LoadConfig read one language.
func TestValueDecoderMatchesDecode(t *testing.T) {
	example, err := os.ReadFile("../node.toml.example")
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"example": string(example),
		"unknown": "version = 1\nextra = 2\n[samplers]\nworkers = 3\nx = 1\n[cache]\ndevice = \"cuda:0\"\n[cache.tier]\nsize = 1\n[[mesh.peers]]\npart = 1\nport = 9\n",
		"rows":    "[[kv.tables]]\nname = \"e\"\nrows = \"nodes\"\ndim = 4\n[kv]\nsave_on_exit = false\n",
		// Inline arrays of tables are arrays of tables too.
		"inline": "[mesh]\npeers = [{part = 0, name = \"a\", addr = \"x:1\"}, {part = 1, nmae = \"b\"}]\n[kv]\ntables = [{name = \"e\", rows = 5, dim = 4}]\n",
	} {
		path := writeConfig(t, t.TempDir(), text)
		var want Config
		md, err := toml.DecodeFile(path, &want)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got Config
		d, err := decodeValues(path, readText(t, path), &got)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(d.problems) > 0 {
			t.Errorf("%s: problems %v", name, d.problems)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: value by value\n%+v\nDecode\n%+v", name, got, want)
		}
		if g, w := keyStrings(d.unknown), keyStrings(md.Undecoded()); !reflect.DeepEqual(g, w) {
			t.Errorf("%s: unknown keys %v, Decode's %v", name, g, w)
		}
	}
}

func keyStrings(keys []toml.Key) []string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = k.String()
	}
	slices.Sort(s)
	return s
}

// FuzzValueDecoder: no file makes LoadConfig panic, and on every file
// toml.Decode takes, decoding value by value agrees with it.
func FuzzValueDecoder(f *testing.F) {
	example, err := os.ReadFile("../node.toml.example")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(example))
	f.Add("version = \"1\"\n[node]\npart = \"0\"\n[[mesh.peers]]\npart = \"x\"\n[[kv.tables]]\nrows = [1]\n")
	f.Add("node = 5\nsamplers = []\n[log]\nlevel = 1979-05-27\n")
	path := f.TempDir() + "/node.toml"
	f.Fuzz(func(t *testing.T, text string) {
		tm := time.AfterFunc(5*time.Second, func() { panic(fmt.Sprintf("hang on %q", text)) })
		defer tm.Stop()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		LoadConfig(path)
		var want Config
		md, err := toml.DecodeFile(path, &want)
		if err != nil {
			return
		}
		var all map[string]any
		if _, err := toml.DecodeFile(path, &all); err != nil || foldTwins(all) {
			return // toml.Decode takes twins in map order, at random
		}
		var got Config
		d, err := decodeValues(path, readText(t, path), &got)
		if err != nil {
			t.Fatalf("Decode took the file, decodeValues did not: %v", err)
		}
		if len(d.problems) > 0 {
			t.Fatalf("Decode took the file, decodeValues refused %v", d.problems)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("value by value\n%+v\nDecode\n%+v", got, want)
		}
		if g, w := keyStrings(d.unknown), keyStrings(md.Undecoded()); !reflect.DeepEqual(g, w) {
			t.Fatalf("unknown keys %v, Decode's %v", g, w)
		}
	})
}

// foldTwins reports whether a table of v holds two keys equal but for
// case ("addr" and "Addr").
func foldTwins(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		var keys []string
		for k, sub := range v {
			for _, o := range keys {
				if strings.EqualFold(k, o) {
					return true
				}
			}
			if foldTwins(sub) {
				return true
			}
			keys = append(keys, k)
		}
	case []map[string]any:
		for _, m := range v {
			if foldTwins(m) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if foldTwins(e) {
				return true
			}
		}
	}
	return false
}

func readText(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLoadConfigInlineArrayOfTables: peers and tables written as inline
// arrays of tables ([{...}, {...}]), which toml.Decode takes, are taken
// when another value of the file has the wrong type too: that value is
// the one problem, and a bad key inside an inline entry is still named.
func TestLoadConfigInlineArrayOfTables(t *testing.T) {
	dir, pre := configDir(t)
	text := pre + `[kv]
tables = [{name = "a", rows = 10, dim = 2, optimizer = "sgd", lr = 0.1, mode = "sync"}, {name = "b", rows = 10, dim = 2, optimizer = "sgd", lr = 0.1, mode = "sync", bogus = 1}]
[log]
level = 3
`
	path := writeConfig(t, dir, text)
	cfg, err := LoadConfig(path)
	want := []string{
		path + `: unknown key "kv.tables[1].bogus"`,
		path + `: log.level: line 9: want a string, not the integer 3`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("problems:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
	if len(cfg.KV.Tables) != 2 || cfg.KV.Tables[1].Name != "b" || cfg.KV.Tables[1].Rows.N != 10 {
		t.Errorf("kv.tables = %+v, want a and b", cfg.KV.Tables)
	}
	// A key given twice in two cases in an inline entry, as in a [[...]] one.
	path = writeConfig(t, dir, pre+"[kv]\ntables = [{name = \"a\", rows = 10, dim = 2, optimizer = \"sgd\", lr = 0.1, LR = 0.2, mode = \"sync\"}]\n")
	if _, err := LoadConfig(path); err == nil || err.Error() != path+": kv.tables[0].LR and kv.tables[0].lr: one key given twice (keys are matched whatever their case); give it once" {
		t.Errorf("LR and lr in one inline table: %v", err)
	}
}

// TestLoadConfigNegativeUnsigned: toml.Decode puts a negative integer
// into an unsigned field without a word, as its two's complement:
// init_seed = -1 seeded the table with 18446744073709551615. It is a
// problem naming the key and the value, with the other problems.
func TestLoadConfigNegativeUnsigned(t *testing.T) {
	dir, pre := configDir(t)
	path := writeConfig(t, dir, pre+`[samplers]
workers = 0
[[kv.tables]]
name = "e"
rows = 10
dim = 4
optimizer = "sgd"
lr = 0.1
mode = "async"
init_seed = -1
`)
	cfg, err := LoadConfig(path)
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("err = %v, want ErrConfig", err)
	}
	want := path + ": kv.tables[0].init_seed: want a non-negative integer, not the integer -1\n" +
		path + ": samplers.workers: 0 is out of range 1..64"
	if err.Error() != want {
		t.Errorf("problems\n%v\nwant\n%s", err, want)
	}
	if len(cfg.KV.Tables) != 1 || cfg.KV.Tables[0].InitSeed != 0 || cfg.KV.Tables[0].Dim != 4 {
		t.Errorf("tables %+v: want the table kept, its refused init_seed 0", cfg.KV.Tables)
	}
}
