package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

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
		if d.vanishAfter > 0 && d.reads.Add(1) == d.vanishAfter {
			go d.srv.Load().Close() // waits for this handler, whose context it ends
			<-ctx.Done()
			return 0, 0, ctx.Err()
		}
		if d.short {
			data = data[:len(data)-1]
		}
	}
	return int64(len(data)), copy(dst, data[off:]), nil
}

// TestFetchAcrossPeers: the peer a part file comes from goes down in the
// middle of it, and the fetch goes on from the same offset at the next
// peer; a peer whose copy has another size is passed over, named.
func TestFetchAcrossPeers(t *testing.T) {
	parts := filepath.Join(t.TempDir(), "parts")
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
	if _, err := partition.Write(ctx, parts, g, adj, assign, partition.WriteOptions{Parts: 3, Method: "random"}); err != nil {
		t.Fatal(err)
	}
	m, err := partition.OpenDir(parts)
	if err != nil {
		t.Fatal(err)
	}
	certs := filepath.Join(t.TempDir(), "certs")
	if err := mesh.WriteCluster(certs, mesh.ClusterSpec{Cluster: "fetch", Nodes: []string{"host0", "host1", "host2"}}); err != nil {
		t.Fatal(err)
	}
	serve := func(p int, files *dirFiles) string {
		id, err := mesh.LoadIdentity(certs, fmt.Sprintf("host%d", p))
		if err != nil {
			t.Fatal(err)
		}
		srv, err := mesh.Listen(context.Background(), "127.0.0.1:0", mesh.ServerConfig{
			Identity: id, Cluster: "fetch", Checksum: m.Checksum, Part: p, Handler: files,
		})
		if err != nil {
			t.Fatal(err)
		}
		files.srv.Store(srv)
		t.Cleanup(func() { srv.Close() })
		return srv.Addr().String()
	}
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
				{Part: 0, Name: "host0", Addr: serve(0, tc.first)},
				{Part: 2, Name: "host2", Addr: serve(2, &dirFiles{dir: parts})},
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
