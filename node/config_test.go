package node

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"graphnode/mesh"
	"graphnode/partition"
)

// configDir makes a parts/ directory with a graph.toml and a directory for
// the socket, and returns the TOML preamble that points at them.
func configDir(t *testing.T) (dir, preamble string) {
	t.Helper()
	dir = t.TempDir()
	parts := filepath.Join(dir, "parts")
	if err := os.MkdirAll(parts, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(parts, "graph.toml"), []byte("# test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	preamble = "version = 1\n[node]\nparts = " + quote(parts) + "\n[control]\nsocket = " + quote(filepath.Join(dir, "node.sock")) + "\n"
	return dir, preamble
}

func quote(s string) string { return `"` + s + `"` }

func writeConfig(t *testing.T, dir, text string) string {
	t.Helper()
	path := filepath.Join(dir, "node.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadConfigDefaults(t *testing.T) {
	dir, pre := configDir(t)
	cfg, err := LoadConfig(writeConfig(t, dir, pre))
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	want := Config{
		Version:  1,
		Node:     NodeConfig{Parts: filepath.Join(dir, "parts"), Part: 0, Name: host, Role: "server"},
		Control:  ControlConfig{Socket: filepath.Join(dir, "node.sock"), Mode: "0660"},
		Rings:    RingsConfig{Dir: "/dev/shm", Size: "1GB"},
		Samplers: SamplersConfig{Workers: 2, Concurrency: 4, MaxLoaders: 16, DrainTimeout: "10s"},
		Mesh:     MeshConfig{Timeout: "10s", Retries: 3},
		KV:       KVConfig{SyncTimeout: "60s", SaveOnExit: new(true)},
		Log:      LogConfig{Level: "info", Format: "auto"},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("config\n%+v\nwant\n%+v", cfg, want)
	}
	if got := cfg.RingSizeBytes(); got != 1e9 {
		t.Errorf("RingSizeBytes = %d, want 1e9", got)
	}
	if got := cfg.RingMode(); got != 0o660 {
		t.Errorf("RingMode = %#o, want 0660: the default socket's group access", got)
	}
	if m, _ := cfg.SocketMode(); m != 0o660 {
		t.Errorf("SocketMode = %#o, want 0660", m)
	}
}

// TestLoadConfigReportsEveryProblem: one file with an unknown key and a bad
// value for every validated key yields one line per problem, each naming
// its key, and the file name in front.
func TestLoadConfigReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, `version = 2
[node]
part = -1
[control]
socket = "/nonexistent-dir/node.sock"
mode = "0666"
group = "no-such-group-xyz"
[rings]
dir = "/nonexistent-rings"
size = "12 parsecs"
[samplers]
wrkers = 3
workers = 0
concurrency = 1000
max_loaders = -2
drain_timeout = "soon"
[metrics]
listen = "nowhere"
[log]
level = "loud"
format = "xml"
[cache]
device = "cuda:0"
`)
	_, err := LoadConfig(path)
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("err = %v, want ErrConfig", err)
	}
	lines := strings.Split(err.Error(), "\n")
	wantKeys := []string{
		`unknown key "samplers.wrkers"`, `unknown key "cache": this build has no [cache] table`, `unknown key "cache.device"`, "version:", "node.parts:", "node.part:", "control.socket:",
		"control.mode:", "control.group:", "rings.dir:", "rings.size:", "samplers.workers:",
		"samplers.concurrency:", "samplers.max_loaders:", "samplers.drain_timeout:", "metrics.listen:", "log.level:", "log.format:",
	}
	if len(lines) != len(wantKeys) {
		t.Errorf("%d problems, want %d:\n%s", len(lines), len(wantKeys), err)
	}
	for _, k := range wantKeys {
		i := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, k) })
		if i < 0 {
			t.Errorf("no problem names %q in:\n%s", k, err)
			continue
		}
		if !strings.HasPrefix(lines[i], path+": ") {
			t.Errorf("line %q does not start with the file name", lines[i])
		}
	}
	// Values are named too, so the user sees what was read.
	for _, v := range []string{`"0666"`, `"12 parsecs"`, "1000", `"loud"`, `"xml"`, "-1", `"nowhere"`} {
		if !strings.Contains(err.Error(), v) {
			t.Errorf("problems do not name the value %s:\n%s", v, err)
		}
	}
}

// TestLoadConfigExplicitZeroIsNotDefaulted: a key given as 0 is judged,
// not replaced by its default, whatever the case the file gives it in:
// the decoder takes `Workers` for samplers.workers, but whether the file
// gave the key was asked case-sensitively, so `Workers = 0` became 2
// without a word (and `Version = 1` was "missing", `Beta1 = 0` 0.9).
func TestLoadConfigExplicitZeroIsNotDefaulted(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"[samplers]\nworkers = 0\n", "samplers.workers: 0 is out of range 1..64"},
		{"[samplers]\nWorkers = 0\n", "samplers.workers: 0 is out of range 1..64"},
		{"[Samplers]\nWORKERS = 0\n", "samplers.workers: 0 is out of range 1..64"},
		{"[mesh]\nRetries = 0\ntimeout = \"30s\"\n", ""}, // 0 retries is valid: kept, not the default 3
		{"[[kv.tables]]\nname = \"a\"\nrows = 10\ndim = 2\noptimizer = \"adam\"\nlr = 0.1\nBeta1 = 0.0\nmode = \"async\"\n",
			`kv.tables[0].beta1: table "a": beta1 0 is not supported`},
	} {
		dir, pre := configDir(t)
		cfg, err := LoadConfig(writeConfig(t, dir, strings.Replace(pre, "version = 1", "Version = 1", 1)+tc.text))
		if tc.want == "" {
			if err != nil || cfg.Mesh.Retries != 0 || cfg.Version != ConfigVersion {
				t.Errorf("%q: %v, retries %d version %d, want 0 retries, version %d", tc.text, err, cfg.Mesh.Retries, cfg.Version, ConfigVersion)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "version") {
			t.Errorf("%q: err = %v, want %s (and no version missing)", tc.text, err, tc.want)
		}
	}
}

// TestLoadConfigKeyInTwoCases: a key given twice in one table, in two
// cases, is refused, naming both: the decoder took either for the field,
// by chance (Workers = 0 and workers = 3 gave 3 or 0 from run to run),
// and validation judged whichever it was, so no problem of it is listed.
func TestLoadConfigKeyInTwoCases(t *testing.T) {
	dir, pre := configDir(t)
	path := writeConfig(t, dir, pre+`[samplers]
Workers = 0
workers = 3
[[kv.tables]]
name = "a"
rows = 10
dim = 2
optimizer = "sgd"
lr = 0.1
mode = "async"
[[kv.tables]]
Name = "b"
name = "c"
rows = 10
dim = 2
optimizer = "sgd"
lr = 0.1
mode = "async"
`)
	want := []string{
		path + ": kv.tables[1].Name and kv.tables[1].name: one key given twice (keys are matched whatever their case); give it once",
		path + ": samplers.Workers and samplers.workers: one key given twice (keys are matched whatever their case); give it once",
	}
	for range 5 { // which value the decoder keeps changes from run to run
		_, err := LoadConfig(path)
		if err == nil || err.Error() != strings.Join(want, "\n") {
			t.Fatalf("err = %v\nwant %s", err, strings.Join(want, "\n"))
		}
	}
}

// TestLoadConfigSocketPathLength: a control.socket longer than a Unix
// socket address holds is refused by config check, naming the key and
// the limit (the node used to start, then fail to bind with "invalid
// argument"); the longest path that is accepted binds.
func TestLoadConfigSocketPathLength(t *testing.T) {
	dir, pre := configDir(t)
	sockets := t.TempDir()
	for _, tc := range []struct {
		length int
		ok     bool
	}{{MaxSocketPath, true}, {MaxSocketPath + 1, false}, {160, false}} {
		t.Run(strconv.Itoa(tc.length), func(t *testing.T) {
			pad := tc.length - len(sockets) - len("/.sock")
			if pad < 1 {
				t.Skipf("temporary directory %s is too long for the test", sockets)
			}
			path := filepath.Join(sockets, strings.Repeat("s", pad)+".sock")
			text := strings.Replace(pre, filepath.Join(dir, "node.sock"), path, 1)
			_, err := LoadConfig(writeConfig(t, dir, text))
			want := fmt.Sprintf("control.socket: %q is %d bytes long, a Unix socket path at most %d", path, tc.length, MaxSocketPath)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("a %d-byte socket path: %v", tc.length, err)
			case !tc.ok && (err == nil || !strings.Contains(err.Error(), want)):
				t.Fatalf("a %d-byte socket path: err = %v, want %q", tc.length, err, want)
			}
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
			if err == nil {
				ln.Close()
			}
			if (err == nil) != tc.ok {
				t.Fatalf("bind of a %d-byte path: %v, but config check says ok = %v", tc.length, err, tc.ok)
			}
		})
	}
}

// TestLoadConfigSocketNotASocket: config check refuses a control.socket
// that names a file or directory other than a socket (the node would
// replace it), naming the key and what is there.
func TestLoadConfigSocketNotASocket(t *testing.T) {
	dir, pre := configDir(t)
	sock := filepath.Join(dir, "node.sock")
	if err := os.Mkdir(sock, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig(writeConfig(t, dir, pre))
	want := fmt.Sprintf("control.socket: %q exists and is not a socket (a directory)", sock)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

func TestLoadConfigSyntaxError(t *testing.T) {
	dir := t.TempDir()
	_, err := LoadConfig(writeConfig(t, dir, "version = \n"))
	if err == nil || errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "node.toml") {
		t.Fatalf("err = %v, want a TOML syntax error naming the file", err)
	}
}

func TestSocketMode(t *testing.T) {
	for _, tc := range []struct {
		mode string
		want os.FileMode
		bad  string
	}{
		{"0660", 0o660, ""},
		{"600", 0o600, ""},
		{"0770", 0o770, ""},
		{"0666", 0, "others"},
		{"0440", 0, "owner"},
		{"0x1", 0, "octal"},
		{"01777", 0, "octal"},
	} {
		c := Config{Control: ControlConfig{Mode: tc.mode}}
		m, err := c.SocketMode()
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("mode %s: err = %v, want one mentioning %q", tc.mode, err, tc.bad)
			}
			continue
		}
		if err != nil || m != tc.want {
			t.Errorf("mode %s = %#o, %v; want %#o", tc.mode, m, err, tc.want)
		}
	}
}

// TestRingMode: rings grant the group read and write exactly when the
// socket lets the group connect (write on it), group or not: a trainer
// that may open a loader may map its ring. Rings were 0600 without
// control.group, beside a 0660 socket of the node's group.
func TestRingMode(t *testing.T) {
	for _, tc := range []struct {
		mode, group string
		want        os.FileMode
	}{
		{"0660", "", 0o660},
		{"0660", "0", 0o660},
		{"0620", "", 0o660},
		{"0770", "", 0o660},
		{"0600", "", 0o600},
		{"0600", "0", 0o600},
		{"0640", "0", 0o600}, // read alone: the group cannot connect
		{"0666", "", 0o600},  // refused by Validate: no access granted
	} {
		c := Config{Control: ControlConfig{Mode: tc.mode, Group: tc.group}}
		if got := c.RingMode(); got != tc.want {
			t.Errorf("mode %s group %q: RingMode %#o, want %#o", tc.mode, tc.group, got, tc.want)
		}
	}
}

func TestGroupID(t *testing.T) {
	c := Config{Control: ControlConfig{Group: "0"}}
	if gid, err := c.GroupID(); err != nil || gid != 0 {
		t.Errorf("group 0 = %d, %v", gid, err)
	}
	// A gid is 32 bits and 2^32-1 means none: chown refused a larger one
	// once the node had started ("invalid argument").
	for _, g := range []string{"4294967295", "99999999999"} {
		c.Control.Group = g
		if gid, err := c.GroupID(); err == nil || err.Error() != "gid "+g+" is out of range 0..4294967294" {
			t.Errorf("group %s = %d, %v; want out of range", g, gid, err)
		}
	}
	c.Control.Group = "4294967294"
	if gid, err := c.GroupID(); err != nil || gid != 4294967294 {
		t.Errorf("group 4294967294 = %d, %v", gid, err)
	}
	c.Control.Group = ""
	if gid, err := c.GroupID(); err != nil || gid != -1 {
		t.Errorf("no group = %d, %v; want -1", gid, err)
	}
}

// TestEncodeTOMLRoundTrips: what `node config check` prints, valid or
// not, loads back to the same configuration with the same problems (a
// key printed with a value that its file refuses would add one), and
// holds every key, defaults filled in.
func TestEncodeTOMLRoundTrips(t *testing.T) {
	dir, pre := configDir(t)
	table := func(opt, more string) string {
		return "[[kv.tables]]\nname = \"t\"\nrows = 10\ndim = 4\nmode = \"async\"\noptimizer = " + quote(opt) + "\n" + more
	}
	for _, tc := range []struct {
		name, text string
		want       []string // lines the output holds
		problems   int
	}{
		{"defaults", pre, []string{"version = 1", `size = "1GB"`, "workers = 2", "save_on_exit = true", `sync_timeout = "60s"`}, 0},
		{"set", pre + "[samplers]\nworkers = 5\n[log]\nformat = \"json\"\n", []string{"workers = 5", `format = "json"`}, 0},
		{"save_on_exit false", pre + "[kv]\ncheckpoint_dir = " + quote(dir) + "\nsave_on_exit = false\n", []string{"save_on_exit = false"}, 0},
		{"workers 0", pre + "[samplers]\nworkers = 0\n", []string{"workers = 0"}, 1},
		{"adam", pre + table("adam", "lr = 0.01\n"), []string{"eps = 1e-08", "beta1 = 0.9", "beta2 = 0.999"}, 0},
		{"sgd", pre + table("sgd", "lr = 0.5\n"), []string{"lr = 0.5"}, 0},
		// Refused before their optimiser's defaults were filled: eps,
		// beta1 and beta2 are 0, which a file may not give.
		{"adam without lr", pre + table("adam", ""), []string{`optimizer = "adam"`}, 1},
		{"adagrad without lr", pre + table("adagrad", ""), []string{`optimizer = "adagrad"`}, 1},
		{"adam of dim 0", pre + strings.Replace(table("adam", "lr = 0.1\n"), "dim = 4", "dim = 0", 1), []string{"dim = 0"}, 1},
	} {
		path := writeConfig(t, dir, tc.text)
		cfg, err := LoadConfig(path)
		if n := len(unjoinAll(err)); n != tc.problems {
			t.Fatalf("%s: %d problems, want %d: %v", tc.name, n, tc.problems, err)
		}
		out, eerr := cfg.EncodeTOML()
		if eerr != nil {
			t.Fatal(eerr)
		}
		lines := strings.Split(string(out), "\n")
		for _, want := range tc.want {
			if !slices.ContainsFunc(lines, func(l string) bool { return strings.TrimSpace(l) == want }) {
				t.Errorf("%s: output lacks %q:\n%s", tc.name, want, out)
			}
		}
		back, berr := LoadConfig(writeConfig(t, dir, string(out)))
		if fmt.Sprint(berr) != fmt.Sprint(err) {
			t.Errorf("%s: the printed config has problems\n%v\nwant\n%v\n%s", tc.name, berr, err, out)
		}
		if !reflect.DeepEqual(back, cfg) {
			t.Errorf("%s: round trip\n%+v\nwant\n%+v", tc.name, back, cfg)
		}
	}
}

// TestEncodeTOMLRoundTripsKVRows: `node config check` prints a
// [[kv.tables]] row count as a bare integer and "nodes" and "relations"
// as strings, the
// forms LoadConfig reads, so the printed effective config loads again.
func TestEncodeTOMLRoundTripsKVRows(t *testing.T) {
	dir, pre := configDir(t)
	table := func(name, rows string) string {
		return "[[kv.tables]]\nname = " + quote(name) + "\nrows = " + rows + "\ndim = 4\noptimizer = \"sgd\"\nlr = 0.1\nmode = \"async\"\n"
	}
	cfg, err := LoadConfig(writeConfig(t, dir, pre+table("dense", "10")+table("entity", `"nodes"`)+table("relation", `"relations"`)))
	if err != nil {
		t.Fatal(err)
	}
	out, err := cfg.EncodeTOML()
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, l := range strings.Split(string(out), "\n") {
		if k, _, _ := strings.Cut(strings.TrimSpace(l), " ="); k == "rows" {
			rows = append(rows, strings.TrimSpace(l))
		}
	}
	if want := []string{"rows = 10", `rows = "nodes"`, `rows = "relations"`}; !slices.Equal(rows, want) {
		t.Errorf("printed rows lines %q, want %q", rows, want)
	}
	back, err := LoadConfig(writeConfig(t, dir, string(out)))
	if err != nil {
		t.Fatalf("the printed effective config does not load: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(back, cfg) {
		t.Fatalf("round trip\n%+v\nwant\n%+v", back.KV, cfg.KV)
	}
	// A quoted count is a string: the error says so, rather than
	// "10 is neither a row count", which reads as a count.
	_, err = LoadConfig(writeConfig(t, dir, pre+table("dense", `"10"`)))
	if err == nil || !strings.Contains(err.Error(), `the string "10" is neither a row count (an integer, unquoted), "nodes" nor "relations"`) {
		t.Errorf("rows = \"10\": %v", err)
	}
}

// TestExampleDocumentsEveryKey: node.toml.example decodes with no unknown
// key, sets every key of Config, and comments each one.
func TestExampleDocumentsEveryKey(t *testing.T) {
	text, err := os.ReadFile("../node.toml.example")
	if err != nil {
		t.Fatal(err)
	}
	var c Config
	md, err := toml.Decode(string(text), &c)
	if err != nil {
		t.Fatal(err)
	}
	if u := md.Undecoded(); len(u) > 0 {
		t.Errorf("example has unknown keys %v", u)
	}
	out, err := (&c).EncodeTOML()
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]any
	if _, err := toml.Decode(string(out), &all); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(text), "\n")
	for table, v := range all {
		keys := []string{table}
		if sub, ok := v.(map[string]any); ok {
			keys = keys[:0]
			for k := range sub {
				keys = append(keys, table+"."+k)
			}
		}
		for _, key := range keys {
			if !md.IsDefined(strings.Split(key, ".")...) {
				t.Errorf("example does not set %s", key)
				continue
			}
			name := key[strings.LastIndex(key, ".")+1:]
			i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, name+" = ") || l == "[["+key+"]]" })
			if i < 1 || !strings.HasPrefix(lines[i-1], "#") {
				t.Errorf("example key %s has no comment above it", key)
			}
		}
	}
}

// TestKVConfig: [kv] tables decode ("nodes" or a count), and every bad
// value is reported with its key.
func TestKVConfig(t *testing.T) {
	dir, pre := configDir(t)
	good := pre + `
[kv]
sync_timeout = "5s"
[[kv.tables]]
name = "entity"
rows = "nodes"
dim = 8
optimizer = "adagrad"
lr = 0.1
mode = "async"
[[kv.tables]]
name = "dense"
rows = 100
dim = 4
optimizer = "average"
mode = "sync"
`
	cfg, err := LoadConfig(writeConfig(t, dir, good))
	if err != nil {
		t.Fatal(err)
	}
	if tb := cfg.KV.Tables; len(tb) != 2 || !tb[0].Rows.Nodes || tb[1].Rows.N != 100 || tb[0].Eps != 1e-10 {
		t.Fatalf("tables %+v", tb)
	}
	if m := cfg.kvMaxBytes(); m != MachineMemory() || m < 64<<20 || m > 1<<50 {
		t.Fatalf("kv.max_memory unset: limit %d bytes, want the machine's memory and swap (%d)", m, MachineMemory())
	}
	cfg, err = LoadConfig(writeConfig(t, dir, strings.Replace(good, `sync_timeout = "5s"`, `sync_timeout = "5s"`+"\nmax_memory = \"2GiB\"", 1)))
	if err != nil || cfg.kvMaxBytes() != 2<<30 {
		t.Fatalf("kv.max_memory = \"2GiB\": %v, limit %d", err, cfg.kvMaxBytes())
	}
	bad := pre + `
[kv]
sync_timeout = "forever"
max_memory = "lots"
load = true
[[kv.tables]]
name = "a"
rows = 10
dim = 0
optimizer = "adam"
lr = 0.1
mode = "sync"
[[kv.tables]]
name = "b"
rows = 10
dim = 2
optimizer = "average"
mode = "async"
[[kv.tables]]
name = "c"
rows = 65536
dim = 256
optimizer = "average"
mode = "sync"
`
	_, err = LoadConfig(writeConfig(t, dir, bad))
	for _, want := range []string{"kv.sync_timeout", `kv.max_memory: "lots"`, "kv.load", "kv.tables[0]", "dim", "kv.tables[1]", "average needs mode sync",
		`kv.tables[2]: node: kv: table "c" (mode sync): a trainer's push of one step carries all 65536 rows × dim 256 (64MiB), over the 64MiB a control frame holds; a sync table of dim 256 holds at most 65535 rows`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %q", err, want)
		}
	}
}

// TestKVConfigExplicitZero: an [[kv.tables]] eps, beta1 or beta2 given
// as 0 is refused, naming the table's key, as a kv_create's is; absent,
// it takes its default.
func TestKVConfigExplicitZero(t *testing.T) {
	dir, pre := configDir(t)
	text := pre + `
[[kv.tables]]
name = "a"
rows = 10
dim = 2
optimizer = "adam"
lr = 0.01
mode = "async"
[[kv.tables]]
name = "b"
rows = 10
dim = 2
optimizer = "adam"
lr = 0.01
beta1 = 0.0
mode = "async"
[[kv.tables]]
name = "c"
rows = 10
dim = 2
optimizer = "adagrad"
lr = 0.1
eps = 0
mode = "async"
`
	cfg, err := LoadConfig(writeConfig(t, dir, text))
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("err = %v, want ErrConfig", err)
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{
		`kv.tables[1].beta1: table "b": beta1 0 is not supported: 0 stands for an absent beta1, whose default is 0.9`,
		`kv.tables[2].eps: table "c": eps 0 is not supported: 0 stands for an absent eps, whose default is 1e-10`,
	}
	if len(lines) != len(want) {
		t.Errorf("%d problems, want %d:\n%s", len(lines), len(want), err)
	}
	for i, w := range want {
		if i < len(lines) && !strings.HasSuffix(lines[i], ": "+w) {
			t.Errorf("problem %d = %q, want it to end %q", i, lines[i], w)
		}
	}
	if cfg.KV.Tables[0].Beta1 != 0.9 || cfg.KV.Tables[0].Eps != 1e-8 {
		t.Errorf("table a, beta1 and eps absent: %+v, want the defaults", cfg.KV.Tables[0])
	}
}

// TestKVConfigTableProblemsNameTheirKey: a [[kv.tables]] entry's problem
// names its key in the file (kv.tables[0].mode), not the kv_create
// request's (table.mode); an unknown key in one names its entry, once per
// entry that has it, with a value of the wrong type elsewhere or not.
func TestKVConfigTableProblemsNameTheirKey(t *testing.T) {
	dir, pre := configDir(t)
	text := pre + `
[[kv.tables]]
name = "a"
rows = 10
dim = 4
optimizer = "sgd"
lr = 0.1
[[kv.tables]]
name = "b"
rows = 10
dim = 4
mode = "sync"
optimiser = "sgd"
[[kv.tables]]
name = "c"
rows = 10
dim = 4
mode = "sync"
optimizer = "sgd"
lr = 1e99
optimiser = "sgd"
`
	want := []string{
		`unknown key "kv.tables[1].optimiser"`,
		`unknown key "kv.tables[2].optimiser"`,
		`kv.tables[0].mode: table "a": missing: sync (dense parameters) or async (sparse embeddings)`,
		`kv.tables[1].optimizer: table "b": missing: sgd, adagrad, adam or average`,
		`kv.tables[2].lr: table "c": 1e+99 is outside float32's range, in which the shards keep it`,
	}
	wrongType := strings.Replace(text, "lr = 0.1", `lr = "0.1"`, 1)
	for name, tc := range map[string]struct {
		text string
		want []string
	}{
		"values": {text, want},
		// The refused lr leaves table a's missing mode to be reported.
		"wrong type": {wrongType, slices.Insert(slices.Clone(want), 2, `kv.tables[0].lr: want a number, not the string "0.1"`)},
		"sections": {pre + "\"a b\" = 1\n[sampler]\nworkers = 2\n[[foo]]\nx = 1\n[[foo]]\nx = 2\n",
			[]string{`unknown key "control.\"a b\""`, `unknown key "sampler"`, `unknown key "sampler.workers"`, `unknown key "foo"`, `unknown key "foo[0].x"`, `unknown key "foo[1].x"`}},
	} {
		path := writeConfig(t, dir, tc.text)
		_, err := LoadConfig(path)
		if !errors.Is(err, ErrConfig) {
			t.Fatalf("%s: err = %v, want ErrConfig", name, err)
		}
		var w []string
		for _, p := range tc.want {
			w = append(w, path+": "+p)
		}
		if got := err.Error(); got != strings.Join(w, "\n") {
			t.Errorf("%s: problems\n%s\nwant\n%s", name, got, strings.Join(w, "\n"))
		}
	}
}

// mountReadOnly mounts a read-only tmpfs on a new directory, unmounted
// after the test; the test skips where this process may not mount. (A
// directory's mode does not stop root: access(2) and open(2) pass it.)
func mountReadOnly(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a read-only tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs on %s: %v: %s", dir, err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// TestCheckpointDirNotWritable: a kv.checkpoint_dir that cannot be
// written (a read-only file system) is a problem of the configuration,
// found at start, not by the first kv_save or the save at exit, after
// the training it was to keep.
func TestCheckpointDirNotWritable(t *testing.T) {
	dir, pre := configDir(t)
	ro := mountReadOnly(t)
	_, err := LoadConfig(writeConfig(t, dir, pre+"[kv]\ncheckpoint_dir = "+quote(ro)+"\n"))
	want := `kv.checkpoint_dir: "` + ro + `" cannot be written: read-only file system (kv_save and the save at exit write there)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("read-only checkpoint_dir: %v, want %q", err, want)
	}
	if _, err := LoadConfig(writeConfig(t, dir, pre+"[kv]\ncheckpoint_dir = "+quote(dir)+"\n")); err != nil {
		t.Fatalf("writable checkpoint_dir: %v", err)
	}
}

// TestRingsDirNotWritable: a rings.dir the node cannot write is refused
// at start, naming rings.dir: the node started, and refused every
// open_loader under ring_size. A read-only file system is a problem of
// the configuration (node config check says so); permission, which
// depends on the user, is New's to check. As root, a read-only mount
// is the only way to have one (a directory's mode does not stop root);
// as another user, a directory of mode 0555.
func TestRingsDirNotWritable(t *testing.T) {
	dir, pre := configDir(t)
	cfg, err := LoadConfig(writeConfig(t, dir, pre+"[rings]\ndir = "+quote(dir)+"\n"))
	if err != nil {
		t.Fatalf("writable rings.dir: %v", err)
	}
	var ro, wantLoad, wantNew string
	if os.Geteuid() == 0 {
		ro = mountReadOnly(t)
		wantLoad = `rings.dir: "` + ro + `" cannot be written: read-only file system (every loader's ring is created there)`
		wantNew = wantLoad
	} else {
		ro = filepath.Join(dir, "rings")
		if err := os.Mkdir(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		wantNew = fmt.Sprintf(`node: rings.dir: %q cannot be written by this node (uid %d): permission denied (every loader's ring is created there)`, ro, os.Getuid())
	}
	_, err = LoadConfig(writeConfig(t, dir, pre+"[rings]\ndir = "+quote(ro)+"\n"))
	switch {
	case wantLoad == "" && err != nil:
		t.Errorf("LoadConfig of a rings.dir of mode 0555: %v, want it left to New", err)
	case wantLoad != "" && (err == nil || !strings.Contains(err.Error(), wantLoad)):
		t.Errorf("LoadConfig of a read-only rings.dir: %v, want %q", err, wantLoad)
	}
	cfg.Rings.Dir = ro
	n, err := New(cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		n.Close()
	}
	if err == nil || !strings.Contains(err.Error(), wantNew) || !errors.Is(err, ErrConfig) {
		t.Errorf("New with rings.dir %s: %v, want %q (ErrConfig)", ro, err, wantNew)
	}
}

// TestLoadConfigRingSizeTooSmall: a rings.size whose sub-rings (one per
// sampler of samplers.workers) cannot hold an error record is refused
// with the least size that works: every loader that left ring_size to
// the node was refused by open_loader, and config check passed it.
func TestLoadConfigRingSizeTooSmall(t *testing.T) {
	dir, pre := configDir(t)
	for _, tc := range []struct {
		rings, workers string
		want           string // "": valid
	}{
		{"1KB", "2", `rings.size: "1KB" gives nothing to each of the 2 sub-rings (samplers.workers), less than one error record takes: every loader that leaves ring_size to the node would be refused; at least 16KiB`},
		{"16KiB", "2", ""},
		{"16KiB", "4", `rings.size: "16KiB" gives 4KiB to each of the 4 sub-rings (samplers.workers), less than one error record takes: every loader that leaves ring_size to the node would be refused; at least 32KiB`},
		// A bad workers is its own problem, not this one's.
		{"1KB", "0", ""},
	} {
		path := writeConfig(t, dir, pre+"[rings]\nsize = "+quote(tc.rings)+"\n[samplers]\nworkers = "+tc.workers+"\n")
		_, err := LoadConfig(path)
		var got []string
		if err != nil {
			for _, l := range strings.Split(err.Error(), "\n") {
				if l = strings.TrimPrefix(l, path+": "); strings.HasPrefix(l, "rings.size") {
					got = append(got, l)
				}
			}
		}
		if tc.want == "" && len(got) > 0 || tc.want != "" && (len(got) != 1 || got[0] != tc.want) {
			t.Errorf("size %s, workers %s: problems %q, want %q", tc.rings, tc.workers, got, tc.want)
		}
	}
}

// TestLoadConfigMissing: a config file that is not there is named once
// ("node: X: no such file or directory", not "node: X: open X: …"), and
// errors.Is finds fs.ErrNotExist.
func TestLoadConfigMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.toml")
	_, err := LoadConfig(path)
	if want := "node: " + path + ": no such file or directory"; err == nil || err.Error() != want || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

// TestDrainTimeoutBound: samplers.drain_timeout is bounded as the mesh's
// timeouts are: "100000h" passed, and the node then waited out any
// sampler that would not stop, past the unit's TimeoutStopSec (5 min).
func TestDrainTimeoutBound(t *testing.T) {
	dir, pre := configDir(t)
	for _, tt := range []struct {
		value string
		ok    bool
	}{{"5m", true}, {"1s", true}, {"5m1s", false}, {"100000h", false}, {"0s", false}} {
		_, err := LoadConfig(writeConfig(t, dir, pre+"[samplers]\ndrain_timeout = "+quote(tt.value)+"\n"))
		if tt.ok != (err == nil) || !tt.ok && !strings.Contains(err.Error(), `samplers.drain_timeout: "`+tt.value+`" is not a duration in (0, 5m0s]`) {
			t.Errorf("drain_timeout %q: err = %v, ok %v", tt.value, err, tt.ok)
		}
	}
}

// TestKVConfigEveryTableProblem: a [[kv.tables]] entry with several
// problems reports each, with its key (it stopped at the first: a missing
// mode hid optimizer "adamw" and dim 0).
func TestKVConfigEveryTableProblem(t *testing.T) {
	dir, pre := configDir(t)
	_, err := LoadConfig(writeConfig(t, dir, pre+"[[kv.tables]]\nname = \"e\"\nrows = 10\ndim = 0\noptimizer = \"adamw\"\ninit = \"ones\"\n"))
	for _, want := range []string{
		"kv.tables[0].dim: table \"e\": 0 is not positive",
		"kv.tables[0].init: table \"e\": \"ones\" is not one of zeros, uniform, normal",
		"kv.tables[0].mode: table \"e\": missing",
		"kv.tables[0].optimizer: table \"e\": \"adamw\" is not one of sgd, adagrad, adam, average",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\ndoes not say %q", err, want)
		}
	}
}

// TestKVConfigRelationsWithoutRelations: a rows = "relations" table
// where graph.toml lists no relations is a problem of config check, named
// with its key, as it is of the node, which refuses to start with it
// (config check passed it), on a sampling node and a client node alike.
func TestKVConfigRelationsWithoutRelations(t *testing.T) {
	dir := t.TempDir()
	parts := filepath.Join(dir, "parts")
	if err := writeSBMPart(parts, partition.SBMConfig{Nodes: 400, Blocks: 2, AvgDegree: 4, Seed: 1, TrainFrac: 0.5, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	tables := "[[kv.tables]]\nname = \"emb\"\nrows = \"nodes\"\ndim = 4\noptimizer = \"sgd\"\nlr = 0.1\nmode = \"async\"\n" +
		"[[kv.tables]]\nname = \"rel\"\nrows = \"relations\"\ndim = 4\noptimizer = \"sgd\"\nlr = 0.1\nmode = \"async\"\n"
	want := `kv.tables[1].rows: table "rel": rows = "relations", but graph.toml lists no relations`
	for _, role := range []string{"", "role = \"client\"\n"} {
		cfg := "version = 1\n[node]\nparts = " + quote(parts) + "\n" + role + "[control]\nsocket = " + quote(filepath.Join(dir, "node.sock")) + "\n"
		if role != "" {
			certs := filepath.Join(dir, "certs")
			if err := mesh.WriteCluster(certs, mesh.ClusterSpec{Cluster: "c", Nodes: []string{"trainer"}, Force: true}); err != nil {
				t.Fatal(err)
			}
			cfg += "[mesh]\ncerts = " + quote(certs) + "\ncluster = \"c\"\n[[mesh.peers]]\npart = 0\nname = \"host0\"\naddr = \"127.0.0.1:7000\"\n"
			cfg = strings.Replace(cfg, "[node]\n", "[node]\nname = \"trainer\"\n", 1)
		}
		_, err := LoadConfig(writeConfig(t, dir, cfg+tables))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "kv.tables[0]") {
			t.Errorf("%q: err = %v\nwant %q alone", role, err, want)
		}
	}
}

// TestKVConfigMaxMemory: [[kv.tables]] whose shards on this part need
// more than kv.max_memory are a problem of config check, as they are of
// the node at start (which alone found it): a counted table and a
// "nodes" one, sized from graph.toml's partition book.
func TestKVConfigMaxMemory(t *testing.T) {
	dir := t.TempDir()
	parts := filepath.Join(dir, "parts")
	if err := writeSBMPart(parts, partition.SBMConfig{Nodes: 400, Blocks: 2, AvgDegree: 4, Seed: 1, TrainFrac: 0.5, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	pre := "version = 1\n[node]\nparts = " + quote(parts) + "\n[control]\nsocket = " + quote(filepath.Join(dir, "node.sock")) + "\n"
	tables := "[[kv.tables]]\nname = \"emb\"\nrows = \"nodes\"\ndim = 64\noptimizer = \"sgd\"\nlr = 0.1\nmode = \"async\"\n" +
		"[[kv.tables]]\nname = \"w\"\nrows = 1000\ndim = 64\noptimizer = \"average\"\nmode = \"sync\"\n"
	// 400 × 64 + 1000 × 64 float32s: 358,400 bytes, and sgd keeps no state.
	for _, tt := range []struct {
		max string
		ok  bool
	}{{"1MB", true}, {"300KB", false}} {
		_, err := LoadConfig(writeConfig(t, dir, pre+"[kv]\nmax_memory = "+quote(tt.max)+"\n"+tables))
		if tt.ok != (err == nil) || !tt.ok && !strings.Contains(err.Error(), `kv.max_memory: "300KB": the shards of [[kv.tables]] on part 0 need 350KiB: raise it`) {
			t.Errorf("max_memory %s: err = %v, ok %v", tt.max, err, tt.ok)
		}
	}
}
