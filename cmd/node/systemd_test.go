package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	stdlog "log"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"graphnode/node"
	"graphnode/node/client"
	"graphnode/node/control"
)

const unitFile = "../../deploy/systemd/graphnode.service"

// readUnit parses a systemd unit file into section -> key -> values (a
// key may repeat). It refuses lines it cannot read.
func readUnit(t *testing.T, path string) map[string]map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	unit := map[string]map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || l[0] == '#' || l[0] == ';':
		case l[0] == '[' && l[len(l)-1] == ']':
			section = l[1 : len(l)-1]
			unit[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not a key=value line in a section: %q", path, line, l)
			}
			unit[section][k] = append(unit[section][k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return unit
}

// TestSystemdUnit holds deploy/systemd/graphnode.service to what the
// daemon does and to node.toml.example's paths: Type=notify (the node
// sends READY=1), SIGTERM to the node alone (it drains its samplers), a
// writable directory for the control socket and for kv checkpoints, and
// no sandboxing that would hide /dev/shm's rings from trainers. Where
// systemd-analyze is installed (.ci/run installs it), it must verify the
// unit without a warning.
func TestSystemdUnit(t *testing.T) {
	unit := readUnit(t, unitFile)
	svc := unit["Service"]
	one := func(key string) string {
		t.Helper()
		if len(svc[key]) != 1 {
			t.Fatalf("[Service] %s: %q, want one value", key, svc[key])
		}
		return svc[key][0]
	}
	for key, want := range map[string]string{
		"Type": "notify", "NotifyAccess": "main", "KillMode": "mixed", "KillSignal": "SIGTERM",
		"ExecStart": "/opt/graphnode/bin/node run -c /etc/graphnode/node.toml",
		"User":      "graphnode", "Group": "graphnode", "ProtectSystem": "strict",
		"WatchdogSec": "30s", "Restart": "on-failure",
		// A sampler the OOM killer takes fails its loader alone; stop
		// (the default) stopped the node and every loader of the host.
		"OOMPolicy": "continue",
		// node run exits 78 for a configuration that no restart mends.
		"RestartPreventExitStatus": strconv.Itoa(exitConfig),
	} {
		if got := one(key); got != want {
			t.Errorf("[Service] %s=%s, want %s", key, got, want)
		}
	}
	for key, why := range map[string]string{
		"PrivateDevices": "a private /dev/shm hides the rings from trainers",
		"PrivateIPC":     "a private IPC namespace hides the rings from trainers",
		"RemoveIPC":      "it removes ring files trainers may still map",
		"ExecReload":     "the node does not handle SIGHUP: a reload would kill it",
	} {
		if v, ok := svc[key]; ok {
			t.Errorf("[Service] %s=%s: %s", key, v[0], why)
		}
	}
	if stop, err := time.ParseDuration(strings.ReplaceAll(one("TimeoutStopSec"), "min", "m")); err != nil || stop < time.Minute {
		t.Errorf("TimeoutStopSec=%s (%v): want at least a minute for the drain and the kv checkpoint", one("TimeoutStopSec"), err)
	}
	if got := unit["Install"]["WantedBy"]; !slices.Equal(got, []string{"multi-user.target"}) {
		t.Errorf("[Install] WantedBy=%q", got)
	}

	// The example configuration's paths are where the sandbox lets the
	// node write: /run/<RuntimeDirectory>, /var/lib/<StateDirectory>.
	var cfg node.Config
	if _, err := toml.DecodeFile("../../node.toml.example", &cfg); err != nil {
		t.Fatal(err)
	}
	writable := map[string]bool{}
	for _, d := range strings.Fields(one("RuntimeDirectory")) {
		writable[filepath.Join("/run", d)] = true
	}
	for _, d := range strings.Fields(one("StateDirectory")) {
		writable[filepath.Join("/var/lib", d)] = true
	}
	if d := filepath.Dir(cfg.Control.Socket); !writable[d] {
		t.Errorf("node.toml.example's control.socket %s: directory %s is not a RuntimeDirectory or StateDirectory of the unit (%v)", cfg.Control.Socket, d, writable)
	}
	if d := cfg.KV.CheckpointDir; !writable[d] {
		t.Errorf("node.toml.example's kv.checkpoint_dir %s is not a RuntimeDirectory or StateDirectory of the unit (%v)", d, writable)
	}
	if cfg.Rings.Dir != "" && cfg.Rings.Dir != "/dev/shm" {
		t.Errorf("node.toml.example's rings.dir %s: the unit leaves only /dev/shm writable for rings", cfg.Rings.Dir)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed: the unit's syntax is not verified")
	}
	// verify wants ExecStart's program to exist: point it at a built node.
	body, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "graphnode.service")
	body = []byte(strings.Replace(string(body), "/opt/graphnode/bin/node", nodeBinary(t), 1))
	if err := os.WriteFile(copyPath, body, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", copyPath).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// notifySocket listens where a test's node sends systemd notifications.
type notifySocket struct {
	path string
	conn *net.UnixConn
	got  []string // every message so far
}

func newNotifySocket(t *testing.T) *notifySocket {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &notifySocket{path: path, conn: c}
}

// await reads messages until one satisfies ok or limit passes; it
// returns that message, or "" at the limit.
func (s *notifySocket) await(t *testing.T, limit time.Duration, ok func(string) bool) string {
	t.Helper()
	buf := make([]byte, 4096)
	deadline := time.Now().Add(limit)
	for {
		s.conn.SetReadDeadline(deadline)
		n, err := s.conn.Read(buf)
		if err != nil {
			if ne, isNet := err.(net.Error); isNet && ne.Timeout() {
				return ""
			}
			t.Fatal(err)
		}
		m := string(buf[:n])
		s.got = append(s.got, m)
		if ok(m) {
			return m
		}
	}
}

// collect reads messages for d and returns every message read so far.
func (s *notifySocket) collect(t *testing.T, d time.Duration) []string {
	t.Helper()
	s.await(t, d, func(string) bool { return false })
	return s.got
}

func prefix(p string) func(string) bool {
	return func(m string) bool { return strings.HasPrefix(m, p) }
}

// TestRunNotifiesSystemd starts node 0 of a two-node cluster under a fake
// systemd: it says which peer it waits for and is not ready while its
// peer is down; once node 1 runs it sends READY=1 with a status naming
// its part, and SIGTERM makes it send STOPPING=1 and exit 0. Node 1 is
// given a NOTIFY_SOCKET nobody listens on: it logs that systemd cannot
// be told, and serves all the same. Node 0's socket file removed, it is
// still vouched for, and binds its socket again.
func TestRunNotifiesSystemd(t *testing.T) {
	bin := nodeBinary(t)
	parts := filepath.Join(t.TempDir(), "parts")
	if out, err := exec.Command(bin, "partition", "--input", writeEdgeList(t, 40), "--format", "edgelist",
		"--undirected", "--self-loops", "drop", "--parts", "2", "--method", "random", "-o", parts).CombinedOutput(); err != nil {
		t.Fatalf("partition: %v\n%s", err, out)
	}
	cl, err := newDemoCluster(bin, t.TempDir(), parts, 2, "16MB", 1)
	stoppedAtEnd(t, cl, err)
	sd := newNotifySocket(t)
	if err := cl.start(0, []string{"NOTIFY_SOCKET=" + sd.path, "WATCHDOG_USEC=1000000"}); err != nil {
		t.Fatal(err)
	}
	if m := sd.await(t, 20*time.Second, prefix("STATUS=waiting for peers")); !strings.Contains(m, "1=node1@127.0.0.1:") {
		t.Fatalf("no status naming the peer waited for; messages %q, log:\n%s", sd.got, tail(cl.logs[0]))
	}
	if m := sd.await(t, time.Second, prefix("READY=1")); m != "" {
		t.Fatalf("READY=1 while peer node1 is down; messages %q", sd.got)
	}

	if err := cl.start(1, []string{"NOTIFY_SOCKET=" + filepath.Join(t.TempDir(), "nobody.sock")}); err != nil {
		t.Fatal(err)
	}
	if m := sd.await(t, 30*time.Second, prefix("READY=1")); m == "" {
		t.Fatalf("no READY=1 after node1 started; messages %q, log:\n%s", sd.got, tail(cl.logs[0]))
	}
	i := slices.IndexFunc(sd.got, prefix("STATUS=serving part 0 of 2 "))
	if i < 0 || i != slices.IndexFunc(sd.got, prefix("READY=1"))-1 || !strings.Contains(sd.got[i], cl.sockets[0]) {
		t.Errorf("want the status naming part 0 and its socket just before READY=1; messages %q", sd.got)
	}
	// WatchdogSec=1s: a WATCHDOG=1 every half second once ready.
	if slices.ContainsFunc(sd.got[:i], prefix("WATCHDOG=1")) {
		t.Errorf("WATCHDOG=1 before READY=1; messages %q", sd.got)
	}
	if n := countFunc(sd.collect(t, 1500*time.Millisecond), prefix("WATCHDOG=1")); n < 2 {
		t.Errorf("%d WATCHDOG=1 within 1.5 s of READY=1 with WATCHDOG_USEC=1000000, want 2 or more; messages %q", n, sd.got)
	}
	if err := cl.waitReady(t.Context(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if log := tail(cl.logs[1]); !strings.Contains(log, "systemd notification failed") || !strings.Contains(log, "nobody.sock") {
		t.Errorf("node1's log does not say that systemd could not be told:\n%s", log)
	}

	// Its socket file removed, node0 is not wedged: still vouched for
	// (it was not, and systemd's SIGABRT lost its kv rows), and it binds
	// its socket again within a second (trainers could not connect until
	// a restart, whose drain ended their jobs).
	if err := os.Remove(cl.sockets[0]); err != nil {
		t.Fatal(err)
	}
	if n := countFunc(sd.collect(t, 1500*time.Millisecond), prefix("WATCHDOG=1")); n < 2 {
		t.Errorf("%d WATCHDOG=1 within 1.5 s of the socket's removal, want 2 or more; messages %q, log:\n%s", n, sd.got, tail(cl.logs[0]))
	}
	var s *control.Stats
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if s, err = client.Stats(t.Context(), cl.sockets[0]); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || s.PID != cl.procs[0].Process.Pid {
		t.Errorf("node0's socket 5 s after its removal: stats %+v, %v; log:\n%s", s, err, tail(cl.logs[0]))
	}
	if log := tail(cl.logs[0]); !strings.Contains(log, "the control socket was removed while the node ran: re-created it") {
		t.Errorf("node0's log does not say that its socket was re-created:\n%s", log)
	}

	if err := cl.procs[0].Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if m := sd.await(t, 15*time.Second, prefix("STOPPING=1")); m == "" {
		t.Fatalf("no STOPPING=1 after SIGTERM; messages %q", sd.got)
	}
	select {
	case err := <-cl.exited[0]:
		if err != nil {
			t.Fatalf("node0 after SIGTERM: %v, log:\n%s", err, tail(cl.logs[0]))
		}
		cl.exited[0] <- nil // for cl.stop
	case <-time.After(15 * time.Second):
		t.Fatal("node0 did not exit within 15 s of SIGTERM")
	}
	if !slices.ContainsFunc(sd.got, prefix("STATUS=stopping")) && sd.await(t, time.Second, prefix("STATUS=stopping")) == "" {
		t.Errorf("no stopping status; messages %q", sd.got)
	}
	got := sd.collect(t, 300*time.Millisecond)
	if stop := slices.IndexFunc(got, prefix("STOPPING=1")); slices.ContainsFunc(got[stop:], prefix("WATCHDOG=1")) {
		t.Errorf("WATCHDOG=1 after STOPPING=1; messages %q", got)
	}
}

func countFunc(s []string, f func(string) bool) int {
	n := 0
	for _, x := range s {
		if f(x) {
			n++
		}
	}
	return n
}

// TestWatchdogInterval: WATCHDOG_USEC and WATCHDOG_PID as systemd sets
// them.
func TestWatchdogInterval(t *testing.T) {
	for _, tc := range []struct {
		usec, pid string
		want      time.Duration
		err       string
	}{
		{"", "", 0, ""},
		{"30000000", "", 30 * time.Second, ""},
		{"30000000", "42", 30 * time.Second, ""},
		{"30000000", "43", 0, ""}, // another process is watched
		{"0", "", 0, "WATCHDOG_USEC=\"0\""},
		{"soon", "42", 0, "WATCHDOG_USEC=\"soon\""},
		{"30000000", "x", 0, "WATCHDOG_PID=\"x\""},
	} {
		got, err := watchdogInterval(tc.usec, tc.pid, 42)
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("watchdogInterval(%q, %q): %v, %v; want %v, error naming %q", tc.usec, tc.pid, got, err, tc.want, tc.err)
		}
	}
}

// TestRouteStdLog: a library's standard-log line (quic-go's UDP buffer
// warning) becomes one JSON warning in the node's log.
func TestRouteStdLog(t *testing.T) {
	defer stdlog.SetOutput(stdlog.Writer())
	defer stdlog.SetFlags(stdlog.Flags())
	var buf bytes.Buffer
	routeStdLog(newHandler(&buf, slog.LevelInfo, "json"))
	stdlog.Printf("failed to sufficiently increase receive buffer size (was: %d kiB)", 208)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil || rec["level"] != "WARN" || rec["msg"] != "failed to sufficiently increase receive buffer size (was: 208 kiB)" {
		t.Fatalf("standard log line came out as %q (%v)", buf.String(), err)
	}
}

// TestExampleChecksBeforeFirstStart: node.toml.example, installed as
// README's "Running under systemd" says (only its files moved to where
// this test keeps them), passes node config check before the unit's
// first start and while it is stopped, when /run/graphnode, the unit's
// RuntimeDirectory, does not exist: that is a warning. It failed there.
func TestExampleChecksBeforeFirstStart(t *testing.T) {
	dir := t.TempDir()
	parts := twoParts(t, dir)
	certs := hostCerts(t, dir, "certs", "products")
	kvDir := filepath.Join(dir, "kv")
	if err := os.Mkdir(kvDir, 0o750); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../../node.toml.example")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for from, to := range map[string]string{
		`parts = "/var/lib/graphnode/parts"`:       `parts = "` + parts + `"`,
		`certs = "/etc/graphnode/certs"`:           `certs = "` + certs + `"`,
		`checkpoint_dir = "/var/lib/graphnode/kv"`: `checkpoint_dir = "` + kvDir + `"`,
	} {
		if strings.Count(text, from) != 1 {
			t.Fatalf("node.toml.example has no line %s, which README's install steps assume", from)
		}
		text = strings.Replace(text, from, to, 1)
	}
	const socket = "/run/graphnode/node.sock"
	if !strings.Contains(text, `socket = "`+socket+`"`) {
		t.Fatalf("node.toml.example's control.socket is not %s", socket)
	}
	cfg := filepath.Join(dir, "node.toml")
	if err := os.WriteFile(cfg, []byte(text), 0o640); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := cliRun("config", "check", "-c", cfg)
	want := ""
	if _, err := os.Stat(filepath.Dir(socket)); err != nil { // the unit stopped, or never started here
		want = "node config: warning: " + cfg + `: control.socket: "` + socket + `": directory "/run/graphnode" does not exist, and node run starts only once it does: ` +
			"systemd makes it as it starts a unit with RuntimeDirectory=graphnode (and removes it at stop); without such a unit, create it\n"
	}
	if code != 0 || stderr != want {
		t.Errorf("config check of node.toml.example: exit %d, stderr:\n%s\nwant exit 0 and %q", code, stderr, want)
	}
	// The unit makes that directory: its RuntimeDirectory= names it.
	if got := readUnit(t, unitFile)["Service"]["RuntimeDirectory"]; !slices.Equal(got, []string{"graphnode"}) {
		t.Errorf("[Service] RuntimeDirectory=%q, want graphnode (the directory of node.toml.example's control.socket)", got)
	}
}

// fakeWatched is the node as the watchdog asks it: its socket lost or
// not, and its in-process answer (nil: alive; else wedged, it waits for
// the watchdog's bound).
type fakeWatched struct {
	lost   bool
	wedged bool
}

func (f fakeWatched) SocketLost() bool { return f.lost }

func (f fakeWatched) Alive(ctx context.Context) error {
	if f.wedged {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

// TestWatchdogAnotherNodesSocket: a node whose socket path now holds
// another node's socket is asked in-process, not through the path: the
// other node's answer vouched for it, wedged or not.
func TestWatchdogAnotherNodesSocket(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "node.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // another node, which answers stats
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if _, err := control.ReadFrame(c); err == nil {
				control.WriteFrame(c, &control.Response{Stats: &control.Stats{Node: "another", PID: 1}})
			}
			c.Close()
		}
	}()
	for _, tc := range []struct {
		n       fakeWatched
		vouched bool
	}{
		{fakeWatched{lost: true, wedged: true}, false},
		{fakeWatched{lost: true}, true},
		{fakeWatched{}, true},
	} {
		sock := newNotifySocket(t)
		var logb bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logb, nil)) // read once the watchdog returned
		sd := &notifier{addr: sock.path, log: log}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			watchdog(ctx, sd, 200*time.Millisecond, socket, tc.n, log)
		}()
		got := sock.await(t, time.Second, prefix("WATCHDOG=1"))
		cancel()
		<-done
		if vouched := got != ""; vouched != tc.vouched {
			t.Errorf("%+v: vouched for %v, want %v; log:\n%s", tc.n, vouched, tc.vouched, logb.String())
		}
	}
}
