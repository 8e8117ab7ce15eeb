package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"graphnode/csr"
	"graphnode/mesh"
	"graphnode/partition"
)

// dirFiles serves the files of a partition directory to peers that fetch
// (mesh.FileHandler), as a node does, misbehaving on request.
type dirFiles struct {
	dir string
	// vanishAfter > 0: the server closes (its host went down) at the
	// vanishAfter-th read of a part file.
	vanishAfter int64
	srv         atomic.Pointer[mesh.Server]
	reads       atomic.Int64
	short       bool // holds every part file less its last byte
	// slow delays every read of a part file: a transfer that takes time.
	slow    time.Duration
	corrupt bool // holds every part file with its size and each byte flipped (bit rot)
}

func (d *dirFiles) SampleNeighbors(context.Context, *mesh.SampleRequest) (*mesh.SampleResponse, error) {
	return nil, errors.New("not sampled here")
}

func (d *dirFiles) PullFeatures(context.Context, *mesh.PullRequest) (*mesh.PullResponse, error) {
	return nil, errors.New("not pulled here")
}

func (d *dirFiles) ReadFile(ctx context.Context, path string, off int64, dst []byte) (int64, int, error) {
	data, err := os.ReadFile(filepath.Join(d.dir, filepath.FromSlash(path)))
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", path, mesh.ErrNotFound)
	}
	if strings.HasSuffix(path, ".csr") {
		time.Sleep(d.slow)
		if d.vanishAfter > 0 && d.reads.Add(1) == d.vanishAfter {
			go d.srv.Load().Close() // waits for this handler, whose context it ends
			<-ctx.Done()
			return 0, 0, ctx.Err()
		}
		if d.short {
			data = data[:len(data)-1]
		}
		if d.corrupt {
			data = bytes.Clone(data)
			for i := range data {
				data[i] ^= 0xff
			}
		}
	}
	return int64(len(data)), copy(dst, data[off:]), nil
}

// fetchFixture writes a partitioning into 3 parts and certificates for
// host0..host2 of cluster "fetch".
func fetchFixture(t *testing.T) (parts string, m *partition.Manifest, certs string) {
	t.Helper()
	parts = filepath.Join(t.TempDir(), "parts")
	ctx := context.Background()
	g, err := partition.SBM(ctx, partition.SBMConfig{Nodes: 2000, Blocks: 2, AvgDegree: 8, FeatDim: 8, Seed: 1, TrainFrac: 0.5, Workers: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	adj, err := partition.BuildAdj(ctx, g, csr.In, partition.CleanOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	assign := make([]uint32, g.NumNodes)
	for i := range assign {
		assign[i] = uint32(i % 3)
	}
	if m, err = partition.Write(ctx, parts, g, adj, assign, partition.WriteOptions{Parts: 3, Method: "random"}); err != nil {
		t.Fatal(err)
	}
	certs = filepath.Join(t.TempDir(), "certs")
	if err := mesh.WriteCluster(certs, mesh.ClusterSpec{Cluster: "fetch", Nodes: []string{"host0", "host1", "host2"}}); err != nil {
		t.Fatal(err)
	}
	return parts, m, certs
}

// serve starts a mesh server of host<p> answering with files; it
// returns its address.
func serve(t *testing.T, certs, checksum string, p int, files *dirFiles) string {
	t.Helper()
	id, err := mesh.LoadIdentity(certs, fmt.Sprintf("host%d", p))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mesh.Listen(context.Background(), "127.0.0.1:0", mesh.ServerConfig{
		Identity: id, Cluster: "fetch", Checksum: checksum, Part: p, Handler: files,
	})
	if err != nil {
		t.Fatal(err)
	}
	files.srv.Store(srv)
	t.Cleanup(func() { srv.Close() })
	return srv.Addr().String()
}

// TestFetchAcrossPeers: the peer a part file comes from goes down in the
// middle of it, and the fetch goes on from the same offset at the next
// peer; a peer whose copy has another size is passed over, named.
func TestFetchAcrossPeers(t *testing.T) {
	parts, m, certs := fetchFixture(t)
	want, err := os.ReadFile(filepath.Join(parts, partition.PartFile(1)))
	if err != nil {
		t.Fatal(err)
	}
	chunk := len(want)/5 + 1
	for _, tc := range []struct {
		name  string
		first *dirFiles
		from  []string
		log   string
	}{
		{"first peer goes down", &dirFiles{dir: parts, vanishAfter: 3}, []string{"host0", "host2"}, "peer unavailable"},
		{"first peer's copy is short", &dirFiles{dir: parts, short: true}, []string{"host2"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Node.Parts, cfg.Node.Part, cfg.Node.Name = filepath.Join(t.TempDir(), "parts"), 1, "host1"
			cfg.Mesh.Certs, cfg.Mesh.Cluster, cfg.Mesh.Timeout, cfg.Mesh.Retries = certs, "fetch", "1s", 1
			cfg.Mesh.Peers = []MeshPeer{
				{Part: 0, Name: "host0", Addr: serve(t, certs, m.Checksum, 0, tc.first)},
				{Part: 2, Name: "host2", Addr: serve(t, certs, m.Checksum, 2, &dirFiles{dir: parts})},
			}
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			got, err := Fetch(context.Background(), cfg, log, FetchOptions{chunk: chunk})
			if err != nil {
				t.Fatalf("%v\n%s", err, &logs)
			}
			if len(got) != 2 || got[1].Path != partition.PartFile(1) || !slices.Equal(got[1].From, tc.from) || got[1].Fetched != int64(len(want)) {
				t.Fatalf("fetched %+v, want part 1 from %v", got, tc.from)
			}
			b, err := os.ReadFile(filepath.Join(cfg.Node.Parts, partition.PartFile(1)))
			if err != nil || !bytes.Equal(b, want) {
				t.Fatalf("part file: %d bytes (%v), want the %d of the source", len(b), err, len(want))
			}
			if !strings.Contains(logs.String(), tc.log) {
				t.Fatalf("log lacks %q:\n%s", tc.log, &logs)
			}
		})
	}
}

// TestFetchPutInPlaceMeanwhile: a file another fetch into the same
// directory put in place between this fetch's look and its lock is
// kept, not downloaded again and renamed over it.
func TestFetchPutInPlaceMeanwhile(t *testing.T) {
	parts, m, certs := fetchFixture(t)
	want, err := os.ReadFile(filepath.Join(parts, partition.PartFile(1)))
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Node.Parts, cfg.Node.Part, cfg.Node.Name = filepath.Join(t.TempDir(), "parts"), 1, "host1"
	cfg.Mesh.Certs, cfg.Mesh.Cluster, cfg.Mesh.Timeout, cfg.Mesh.Retries = certs, "fetch", "1s", 1
	cfg.Mesh.Peers = []MeshPeer{{Part: 0, Name: "host0", Addr: serve(t, certs, m.Checksum, 0, &dirFiles{dir: parts})}}
	var other os.FileInfo
	fetchBeforeLock = func(final string) {
		if filepath.Base(final) != filepath.Base(partition.PartFile(1)) {
			return
		}
		// The other fetch: its .fetch renamed onto the file.
		if err := os.WriteFile(final, want, 0o644); err != nil {
			t.Error(err)
		}
		other, _ = os.Stat(final)
	}
	defer func() { fetchBeforeLock = nil }()
	got, err := Fetch(context.Background(), cfg, slog.New(slog.DiscardHandler), FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].Fetched != 0 {
		t.Errorf("fetched %+v, want part 1 kept as the other fetch put it", got)
	}
	final := filepath.Join(cfg.Node.Parts, partition.PartFile(1))
	if st, err := os.Stat(final); err != nil || other == nil || !os.SameFile(st, other) {
		t.Errorf("part 1 was replaced (%v)", err)
	}
	if _, err := os.Stat(final + fetchSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s%s left (%v)", final, fetchSuffix, err)
	}
}

// TestFetchClientNode: a client node (server-client mode) fetches
// graph.toml and nothing else; --all also takes every file of the set.
func TestFetchClientNode(t *testing.T) {
	_, m, cfg := clientFetch(t)
	log := slog.New(slog.DiscardHandler)
	got, err := Fetch(context.Background(), cfg, log, FetchOptions{})
	if err != nil || len(got) != 1 || got[0].Path != partition.ManifestFile {
		t.Fatalf("client node fetched %+v, %v; want graph.toml alone", got, err)
	}
	if _, err := partition.OpenManifest(cfg.Node.Parts); err != nil {
		t.Fatal(err)
	}
	got, err = Fetch(context.Background(), cfg, log, FetchOptions{All: true})
	if err != nil || len(got) != 1+len(m.File) || got[0].Fetched != 0 {
		t.Fatalf("--all fetched %+v, %v; want graph.toml present and %d files", got, err, len(m.File))
	}
	if _, err := partition.OpenDir(cfg.Node.Parts); err != nil {
		t.Fatal(err)
	}
}

// TestFetchAllNeedsRoomFirst: fetch --all checks the room of every file
// it fetches before the first: it fetched orig_ids.bin and a part file
// before it found no room for the next. What a fetch cut off left counts
// as there.
func TestFetchAllNeedsRoomFirst(t *testing.T) {
	parts, m, cfg := clientFetch(t)
	var total int64
	for _, e := range m.File {
		total += e.Size
	}
	var room int64
	orig := freeSpace
	freeSpace = func(string) (int64, error) { return room, nil }
	defer func() { freeSpace = orig }()
	log := slog.New(slog.DiscardHandler)
	room = total - 1
	got, err := Fetch(context.Background(), cfg, log, FetchOptions{All: true})
	if !errors.Is(err, ErrFetch) || !strings.Contains(err.Error(), " and "+strconv.Itoa(len(m.File)-2)+" more: needs ") || len(got) != 1 {
		t.Fatalf("--all with a byte too little: %+v, %v; want graph.toml alone and the room refused first", got, err)
	}
	// A part file's bytes left by a fetch cut off: the rest fits.
	p := filepath.Join(cfg.Node.Parts, partition.PartFile(1))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(parts, partition.PartFile(1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p+fetchSuffix, b[:100], 0o644); err != nil {
		t.Fatal(err)
	}
	room = total - 100
	if _, err := Fetch(context.Background(), cfg, log, FetchOptions{All: true}); err != nil {
		t.Fatalf("--all with room for the rest: %v", err)
	}
}

// TestFetchRoomPerFileSystem: the room of the files to fetch is asked of
// the file system each goes to: a part directory that is a link to (or a
// mount of) another disk was refused for the room of node.parts' own,
// which fetched it file by file before.
func TestFetchRoomPerFileSystem(t *testing.T) {
	parts, m, certs := fetchFixture(t)
	other, err := os.MkdirTemp("/dev/shm", "fetch-room-")
	if err != nil {
		t.Skip("no /dev/shm:", err)
	}
	t.Cleanup(func() { os.RemoveAll(other) })
	cfg := DefaultConfig()
	cfg.Node.Parts, cfg.Node.Part, cfg.Node.Name = filepath.Join(t.TempDir(), "parts"), 1, "host1"
	cfg.Mesh.Certs, cfg.Mesh.Cluster, cfg.Mesh.Timeout, cfg.Mesh.Retries = certs, "fetch", "1s", 1
	cfg.Mesh.Peers = []MeshPeer{{Part: 0, Name: "host0", Addr: serve(t, certs, m.Checksum, 0, &dirFiles{dir: parts})}}
	if err := os.MkdirAll(cfg.Node.Parts, 0o755); err != nil {
		t.Fatal(err)
	}
	a, errA := os.Stat(cfg.Node.Parts)
	b, errB := os.Stat(other)
	if errA != nil || errB != nil || a.Sys().(*syscall.Stat_t).Dev == b.Sys().(*syscall.Stat_t).Dev {
		t.Skip("/dev/shm is on the file system of the test's temporary directory")
	}
	copyManifest(t, parts, cfg.Node.Parts)
	if err := os.Symlink(other, filepath.Join(cfg.Node.Parts, filepath.Dir(partition.PartFile(1)))); err != nil {
		t.Fatal(err)
	}
	// node.parts' disk is full; the part directory's has room.
	orig := freeSpace
	freeSpace = func(dir string) (int64, error) {
		if real, err := filepath.EvalSymlinks(dir); err == nil && strings.HasPrefix(real, other) {
			return 1 << 40, nil
		}
		return 0, nil
	}
	defer func() { freeSpace = orig }()
	got, err := Fetch(context.Background(), cfg, slog.New(slog.DiscardHandler), FetchOptions{})
	if err != nil {
		t.Fatalf("part directory on a disk with room: %v", err)
	}
	if len(got) != 2 || got[1].Path != partition.PartFile(1) || got[1].Fetched != got[1].Size {
		t.Fatalf("fetched %+v, want part 1 whole", got)
	}
}

// TestFetchLocked: a second fetch of a file another is writing fails
// at once, naming it, and leaves its bytes alone.
func TestFetchLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "part.csr.fetch")
	first, err := openPartial(path, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer first.close()
	if err := first.write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	if _, err := openPartial(path, 100); !errors.Is(err, ErrFetch) || !strings.Contains(err.Error(), "another fetch is writing it") {
		t.Fatalf("second open: %v", err)
	}
	first.close()
	again, err := openPartial(path, 100)
	if err != nil || again.have != 3 || again.crc != first.crc {
		t.Fatalf("reopened: %+v %v, want 3 bytes and their CRC", again, err)
	}
	again.close()
}

// TestFetchCorruptCopy: a peer whose copy has graph.toml's size and
// other bytes is left out after one download and the file is fetched
// again from the others, the bad peer named in the log; with every copy
// corrupt the fetch fails naming each peer and graph.toml's CRC-32C.
func TestFetchCorruptCopy(t *testing.T) {
	parts, m, certs := fetchFixture(t)
	want, err := os.ReadFile(filepath.Join(parts, partition.PartFile(1)))
	if err != nil {
		t.Fatal(err)
	}
	e := m.Lookup(partition.PartFile(1))
	if e == nil {
		t.Fatalf("%s lacks %s", partition.ManifestFile, partition.PartFile(1))
	}
	chunk := len(want)/5 + 1
	for _, tc := range []struct {
		name       string
		host2      *dirFiles
		earlier    int      // bytes of the good copy an earlier fetch left in <name>.fetch
		from       []string // nil: the fetch fails
		logs, errs []string
		partial    bool // a failed fetch leaves <name>.fetch for the next to go on from
	}{
		{name: "first peer's copy is corrupt", host2: &dirFiles{dir: parts},
			from: []string{"host2"}, logs: []string{"peer served a corrupt copy", "peer=host0", "want=" + e.CRC32C}},
		{name: "going on from an earlier fetch", host2: &dirFiles{dir: parts}, earlier: chunk,
			from: []string{"host2"}, logs: []string{"went on from an earlier fetch", "peer served a corrupt copy", "peer=host0"}},
		{name: "every copy is corrupt", host2: &dirFiles{dir: parts, corrupt: true},
			logs: []string{"peer=host0", "peer=host2"},
			errs: []string{"no peer is left", "host0, host2", "CRC-32C " + e.CRC32C, "the bytes from host0 have", "the bytes from host2 have"}},
		{name: "no other peer holds it", host2: &dirFiles{dir: t.TempDir()}, partial: true,
			logs: []string{"peer=host0"},
			errs: []string{"no peer holds it", "the bytes from host0 have"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Node.Parts, cfg.Node.Part, cfg.Node.Name = filepath.Join(t.TempDir(), "parts"), 1, "host1"
			cfg.Mesh.Certs, cfg.Mesh.Cluster, cfg.Mesh.Timeout, cfg.Mesh.Retries = certs, "fetch", "1s", 1
			cfg.Mesh.Peers = []MeshPeer{
				{Part: 0, Name: "host0", Addr: serve(t, certs, m.Checksum, 0, &dirFiles{dir: parts, corrupt: true})},
				{Part: 2, Name: "host2", Addr: serve(t, certs, m.Checksum, 2, tc.host2)},
			}
			final := filepath.Join(cfg.Node.Parts, partition.PartFile(1))
			if tc.earlier > 0 {
				if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
					t.Fatal(err)
				}
				copyManifest(t, parts, cfg.Node.Parts)
				if err := os.WriteFile(final+fetchSuffix, want[:tc.earlier], 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			got, err := Fetch(context.Background(), cfg, log, FetchOptions{chunk: chunk})
			for _, s := range tc.logs {
				if !strings.Contains(logs.String(), s) {
					t.Errorf("log lacks %q:\n%s", s, &logs)
				}
			}
			if tc.from == nil {
				if !errors.Is(err, ErrFetch) {
					t.Fatalf("fetched %+v, %v; want %v", got, err, ErrFetch)
				}
				for _, s := range tc.errs {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error lacks %q: %v", s, err)
					}
				}
				if _, err := os.Stat(final); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s: %v, want none", final, err)
				}
				if _, err := os.Stat(final + fetchSuffix); !tc.partial && !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s: %v, want it removed", final+fetchSuffix, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, &logs)
			}
			if len(got) != 2 || got[1].Path != partition.PartFile(1) || !slices.Equal(got[1].From, tc.from) || got[1].Resumed != 0 || got[1].Fetched != int64(len(want)) {
				t.Fatalf("fetched %+v, want part 1 from %v, not resumed", got, tc.from)
			}
			b, err := os.ReadFile(final)
			if err != nil {
				t.Fatal(err)
			}
			crc, err := crcOf(bytes.NewReader(b))
			if err != nil || fmt.Sprintf("%08x", crc) != e.CRC32C || !bytes.Equal(b, want) {
				t.Fatalf("part file: %d bytes with CRC-32C %08x, want the %d of the source with %s", len(b), crc, len(want), e.CRC32C)
			}
		})
	}
}

// TestFetchWaitBound: with every peer down, Fetch gives up about Wait
// after it began, one try late at most (a dial, mesh.DialTimeout), not a
// whole call of mesh.retries attempts later.
func TestFetchWaitBound(t *testing.T) {
	_, _, certs := fetchFixture(t)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := pc.LocalAddr().String()
	pc.Close() // nothing answers there
	cfg := DefaultConfig()
	cfg.Node.Parts, cfg.Node.Part, cfg.Node.Name = filepath.Join(t.TempDir(), "parts"), 1, "host1"
	cfg.Mesh.Certs, cfg.Mesh.Cluster, cfg.Mesh.Timeout, cfg.Mesh.Retries = certs, "fetch", "10s", 3
	cfg.Mesh.Peers = []MeshPeer{{Part: 0, Name: "host0", Addr: dead}}
	const wait = time.Second
	start := time.Now()
	_, err = Fetch(context.Background(), cfg, slog.New(slog.DiscardHandler), FetchOptions{Wait: wait})
	took := time.Since(start)
	if !errors.Is(err, ErrFetch) || !strings.Contains(err.Error(), "no peer could give it within 1s") {
		t.Fatalf("err = %v, want ErrFetch after the wait", err)
	}
	// Generous for a loaded machine, and below the 4 attempts (about
	// 4 × 2 s of handshake) a call with retries makes.
	if limit := wait + mesh.DialTimeout + 2*time.Second; took > limit {
		t.Errorf("Fetch gave up after %v, want within %v (--wait %v)", took, limit, wait)
	}
}

// TestFetchPeerRestartsLate: the one peer goes down in the middle of a
// transfer that has been moving for longer than Wait, and is back a
// moment later (as a peer restarted by its unit is); the fetch asks it again and goes on from its bytes. Wait
// bounds the time without progress, not the transfer: the fetch gave up
// at the first failure once Wait had passed since it began, a
// multi-gigabyte part fetched over two minutes failing on a peer's
// restart that a resume rode out.
func TestFetchPeerRestartsLate(t *testing.T) {
	parts, m, certs := fetchFixture(t)
	want, err := os.ReadFile(filepath.Join(parts, partition.PartFile(1)))
	if err != nil {
		t.Fatal(err)
	}
	// 8 reads of 300 ms before it goes down: longer than the Wait of 2 s.
	first := &dirFiles{dir: parts, vanishAfter: 9, slow: 300 * time.Millisecond}
	addr := serve(t, certs, m.Checksum, 0, first)
	id, err := mesh.LoadIdentity(certs, "host0")
	if err != nil {
		t.Fatal(err)
	}
	restarted := make(chan error, 1)
	go func() {
		for first.reads.Load() < first.vanishAfter {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond) // down for a moment
		again := &dirFiles{dir: parts}
		var srv *mesh.Server
		var err error
		for try := 0; try < 20; try++ { // the old server may hold the port a little longer
			if srv, err = mesh.Listen(context.Background(), addr, mesh.ServerConfig{
				Identity: id, Cluster: "fetch", Checksum: m.Checksum, Part: 0, Handler: again,
			}); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err == nil {
			again.srv.Store(srv)
			t.Cleanup(func() { srv.Close() })
		}
		restarted <- err
	}()
	cfg := DefaultConfig()
	cfg.Node.Parts, cfg.Node.Part, cfg.Node.Name = filepath.Join(t.TempDir(), "parts"), 1, "host1"
	cfg.Mesh.Certs, cfg.Mesh.Cluster, cfg.Mesh.Timeout, cfg.Mesh.Retries = certs, "fetch", "1s", 1
	cfg.Mesh.Peers = []MeshPeer{{Part: 0, Name: "host0", Addr: addr}}
	var logs bytes.Buffer
	got, err := Fetch(context.Background(), cfg, slog.New(slog.NewTextHandler(&logs, nil)), FetchOptions{Wait: 2 * time.Second, chunk: len(want)/10 + 1})
	if rerr := <-restarted; rerr != nil {
		t.Fatalf("restart the peer: %v", rerr)
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, &logs)
	}
	if len(got) != 2 || got[1].Fetched != int64(len(want)) {
		t.Fatalf("fetched %+v, want all %d bytes of part 1", got, len(want))
	}
	b, err := os.ReadFile(filepath.Join(cfg.Node.Parts, partition.PartFile(1)))
	if err != nil || !bytes.Equal(b, want) {
		t.Fatalf("part file: %d bytes (%v), want the %d of the source", len(b), err, len(want))
	}
}

// TestFetchRefusedAtOnce: a host whose graph.toml is of another
// partitioning than its peers' is refused by every peer; the fetch fails
// at once naming the refusals (waiting cannot heal them), where it asked
// again every second for the whole --wait (2 minutes by default) before
// it said "no peer could give it".
func TestFetchRefusedAtOnce(t *testing.T) {
	parts, _, certs := fetchFixture(t)
	cfg := DefaultConfig()
	cfg.Node.Parts, cfg.Node.Part, cfg.Node.Name = filepath.Join(t.TempDir(), "parts"), 1, "host1"
	if err := os.MkdirAll(cfg.Node.Parts, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(parts, partition.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg.Node.Parts, partition.ManifestFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	const other = "0123456789abcdef0123456789abcdef"
	cfg.Mesh.Certs, cfg.Mesh.Cluster, cfg.Mesh.Timeout, cfg.Mesh.Retries = certs, "fetch", "1s", 1
	cfg.Mesh.Peers = []MeshPeer{
		{Part: 0, Name: "host0", Addr: serve(t, certs, other, 0, &dirFiles{dir: parts})},
		{Part: 2, Name: "host2", Addr: serve(t, certs, other, 2, &dirFiles{dir: parts})},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = Fetch(ctx, cfg, slog.New(slog.DiscardHandler), FetchOptions{})
	if ctx.Err() != nil {
		t.Fatalf("Fetch still asked the peers that refused it after 30 s: %v", err)
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if !errors.Is(err, ErrFetch) || !strings.Contains(msg, "refused") ||
		!strings.Contains(msg, "peer host0 (") || !strings.Contains(msg, "peer host2 (") || !strings.Contains(msg, "checksum") {
		t.Fatalf("err = %v, want ErrFetch naming both peers' checksum refusals", err)
	}
}

// TestFetchKGEvalTriples: on a knowledge graph's set, a node fetches the
// evaluation triples (triples-valid.bin, triples-test.bin) besides its
// part: every node kge evaluation reads them, and without --all node kge
// on a fetched host failed for want of triples-test.bin. A client node,
// whose trainers evaluate too, takes them with graph.toml.
func TestFetchKGEvalTriples(t *testing.T) {
	in := t.TempDir()
	for name, text := range map[string]string{
		"entities.dict":  "0\ta\n1\tb\n2\tc\n3\td\n",
		"relations.dict": "0\tr\n1\ts\n",
		"train.txt":      "a\tr\tb\nb\ts\tc\nc\tr\td\nd\ts\ta\na\ts\tc\n",
		"valid.txt":      "b\tr\tc\n",
		"test.txt":       "c\ts\td\nd\tr\tb\n",
	} {
		if err := os.WriteFile(filepath.Join(in, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	g, err := partition.Read(ctx, in, partition.ReadOptions{Format: partition.FormatKG})
	if err != nil {
		t.Fatal(err)
	}
	adj, err := partition.BuildAdj(ctx, g, csr.In, partition.CleanOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	parts := filepath.Join(t.TempDir(), "parts")
	m, err := partition.Write(ctx, parts, g, adj, []uint32{0, 1, 0, 1}, partition.WriteOptions{Parts: 2, Method: "random"})
	if err != nil {
		t.Fatal(err)
	}
	certs := filepath.Join(t.TempDir(), "certs")
	if err := mesh.WriteCluster(certs, mesh.ClusterSpec{Cluster: "fetch", Nodes: []string{"host0", "host1", "trainer"}}); err != nil {
		t.Fatal(err)
	}
	addr := serve(t, certs, m.Checksum, 0, &dirFiles{dir: parts})
	for _, role := range []string{RoleServer, RoleClient} {
		cfg := DefaultConfig()
		cfg.Node.Parts, cfg.Node.Role = filepath.Join(t.TempDir(), "parts"), role
		cfg.Node.Part, cfg.Node.Name = 1, "host1"
		if role == RoleClient {
			cfg.Node.Part, cfg.Node.Name = 0, "trainer"
		}
		cfg.Mesh.Certs, cfg.Mesh.Cluster, cfg.Mesh.Timeout = certs, "fetch", "1s"
		cfg.Mesh.Peers = []MeshPeer{{Part: 0, Name: "host0", Addr: addr}}
		got, err := Fetch(ctx, cfg, slog.New(slog.DiscardHandler), FetchOptions{})
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		var paths []string
		for _, f := range got {
			paths = append(paths, f.Path)
		}
		want := []string{partition.ManifestFile, partition.TriplesTestFile, partition.TriplesValidFile}
		if role == RoleServer {
			want = []string{partition.ManifestFile, partition.PartFile(1), partition.TriplesTestFile, partition.TriplesValidFile}
		}
		slices.Sort(paths[1:])
		slices.Sort(want[1:])
		if !slices.Equal(paths, want) {
			t.Errorf("%s fetched %v, want %v", role, paths, want)
		}
		tr, err := partition.ReadTriples(cfg.Node.Parts, m, partition.TriplesTestFile)
		if err != nil || tr.Len() != 2 {
			t.Errorf("%s: %s: %d triples, %v; want 2", role, partition.TriplesTestFile, tr.Len(), err)
		}
	}
}

// TestMissingPartNamesFetch: a node whose part file is missing while a
// fetch cut off left most of it in its .fetch says so, and how to go on:
// it said the file was missing alone.
func TestMissingPartNamesFetch(t *testing.T) {
	parts, _, _ := fetchFixture(t)
	cfg := DefaultConfig()
	cfg.Node.Parts, cfg.Node.Part = filepath.Join(t.TempDir(), "parts"), 1
	if err := os.MkdirAll(filepath.Join(cfg.Node.Parts, "part-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	partial := filepath.Join(cfg.Node.Parts, partition.PartFile(1)) + fetchSuffix
	if err := os.WriteFile(partial, make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	// graph.toml missing: the .fetch is not what is missing.
	if _, _, err := openManifest(&cfg); err == nil || strings.Contains(err.Error(), fetchSuffix) {
		t.Fatalf("no graph.toml: %v, want it missing, no word of the part's .fetch", err)
	}
	copyManifest(t, parts, cfg.Node.Parts)
	if err := os.Rename(partial, partial+".aside"); err != nil {
		t.Fatal(err)
	}
	_, _, err := openManifest(&cfg)
	if err == nil || strings.Contains(err.Error(), fetchSuffix) {
		t.Fatalf("no .fetch: %v, want the part file missing, no word of a fetch", err)
	}
	if err := os.Rename(partial+".aside", partial); err != nil {
		t.Fatal(err)
	}
	_, _, err = openManifest(&cfg)
	if want := partial + " holds 100 bytes of it, from a fetch cut off: node fetch -c, or [node] fetch = true, goes on from them"; err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("with a .fetch: %v, want %q", err, want)
	}
}

// copyManifest copies graph.toml of the directory from into to, as a
// fetch that has it and none of the files yet.
func copyManifest(t *testing.T, from, to string) {
	t.Helper()
	toml, err := os.ReadFile(filepath.Join(from, partition.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(to, partition.ManifestFile), toml, 0o644); err != nil {
		t.Fatal(err)
	}
}

// clientFetch is the fixture's set (parts, its graph.toml m) served by
// host0, and the config of a client node, host1, fetching it into a
// directory of its own.
func clientFetch(t *testing.T) (parts string, m *partition.Manifest, cfg Config) {
	t.Helper()
	parts, m, certs := fetchFixture(t)
	cfg = DefaultConfig()
	cfg.Node.Parts, cfg.Node.Role, cfg.Node.Name = filepath.Join(t.TempDir(), "parts"), RoleClient, "host1"
	cfg.Mesh.Certs, cfg.Mesh.Cluster, cfg.Mesh.Timeout = certs, "fetch", "1s"
	cfg.Mesh.Peers = []MeshPeer{{Part: 0, Name: "host0", Addr: serve(t, certs, m.Checksum, 0, &dirFiles{dir: parts})}}
	return parts, m, cfg
}
