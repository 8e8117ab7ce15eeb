package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"graphnode/mesh"
	"graphnode/partition"
)

// ErrFetch wraps every failure to fetch the partition's files from peers.
var ErrFetch = errors.New("cannot fetch the partition's files")

// Fetch defaults.
const (
	// FetchChunk is the size of one file request: large enough that a
	// round trip is a small part of its transfer, small enough that a
	// peer going down loses little.
	FetchChunk = 8 << 20
	// DefaultFetchWait is how long Fetch keeps asking peers that cannot
	// be reached (started after this node, say) before it gives up.
	DefaultFetchWait = 2 * time.Minute
	// fetchSuffix names the file a fetch writes before it is whole; a
	// fetch cut off goes on from its bytes the next time.
	fetchSuffix = ".fetch"
	// maxManifestBytes bounds a fetched graph.toml.
	maxManifestBytes = 64 << 20
)

// FetchOptions configures Fetch.
type FetchOptions struct {
	// All fetches every file graph.toml lists, not only those the host
	// needs (graph.toml, its part's file and a knowledge graph's
	// evaluation triples): for a host that also runs tools that read the
	// whole set (node kge's filtered evaluation, node inspect --verify,
	// orig_ids.bin for mapping ids back).
	All bool
	// Wait bounds how long Fetch keeps asking peers that cannot be
	// reached, from its start or from the last bytes a peer gave; 0 =
	// DefaultFetchWait. A try under way when it passes ends first: within
	// mesh.DialTimeout for a peer that is down, while a transfer that is
	// moving is never cut off.
	Wait time.Duration
	// Progress, when set, receives a line about the transfer about once
	// a second (systemd's STATUS=, a terminal's progress line).
	Progress func(line string)

	chunk int // tests only: bytes per request; 0 = FetchChunk
}

// FetchedFile is what Fetch did about one file.
type FetchedFile struct {
	Path    string   // slash path in the partition directory
	Size    int64    // its size
	Fetched int64    // bytes transferred now; 0 when it was on disk already
	Resumed int64    // bytes of an earlier, interrupted fetch it went on from
	From    []string // the peers the bytes came from
	Elapsed time.Duration
}

// Fetch makes the files this node needs present under node.parts,
// reading those it lacks from the peers of [mesh.peers]: first graph.toml
// when there is none (over a connection that presents no partition-set
// checksum, which peers serve files only), then, checked against it, the
// part file of node.part (a client node needs graph.toml alone) and a
// knowledge graph's evaluation triples, or with opts.All every file
// graph.toml lists.
//
// Peers are asked in the order of their parts; one that does not hold a
// file is skipped, one that cannot be reached is asked again until
// opts.Wait has passed. A file is written to <name>.fetch and renamed
// once its size and CRC-32C equal graph.toml's; a fetch cut off (a peer
// gone, the node stopped, the disk full) leaves that file, and the next
// Fetch goes on from its bytes, from any peer. A download whose CRC-32C
// is wrong is dropped and fetched again from its start without the
// peers that gave its bytes (logged, named in the error when no peer is
// left), so one peer's corrupt copy does not stop the fetch while
// another holds a good one. A file already there is
// kept as it is when its size is graph.toml's, and is an error otherwise:
// Fetch never replaces a file it did not write.
func Fetch(ctx context.Context, cfg Config, log *slog.Logger, opts FetchOptions) ([]FetchedFile, error) {
	if !cfg.MeshEnabled() {
		return nil, fmt.Errorf("node: fetch: no [mesh] to fetch the partition's files from: %w", ErrFetch)
	}
	if opts.Wait == 0 {
		opts.Wait = DefaultFetchWait
	}
	if opts.chunk == 0 {
		opts.chunk = FetchChunk
	}
	id, err := loadIdentity(&cfg) // New's check: ErrConfig, as there
	if err != nil {
		return nil, err
	}
	dir := cfg.Node.Parts
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("node: fetch: node.parts: %w", err)
	}
	peers := cfg.meshPeers()
	f := &fetcher{cfg: &cfg, log: log, opts: opts, dir: dir, id: id, idleSince: time.Now(),
		peers: peers, order: slices.Sorted(maps.Keys(peers))}
	var done []FetchedFile
	m, err := partition.OpenManifest(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		var got FetchedFile
		if m, got, err = f.manifest(ctx); err != nil {
			return nil, err
		}
		done = append(done, got)
	case err != nil:
		return nil, fmt.Errorf("node: node.parts: %w", err)
	default:
		done = append(done, FetchedFile{Path: partition.ManifestFile})
	}
	if !cfg.Client() && cfg.Node.Part >= m.Parts {
		return done, fmt.Errorf("node: node.part = %d, but %s has %d partitions: %w", cfg.Node.Part, filepath.Join(dir, partition.ManifestFile), m.Parts, ErrConfig)
	}
	var want []partition.FileEntry
	for _, e := range m.File {
		if opts.All || !cfg.Client() && e.Path == partition.PartFile(cfg.Node.Part) || partition.EvalTriples(e.Path) {
			want = append(want, e)
		}
	}
	if len(want) == 0 {
		return done, nil
	}
	// The files' room at once, not file by file: --all fetched
	// orig_ids.bin and a part file before it found no room for the next.
	if err := checkRoom(dir, want); err != nil {
		return done, fmt.Errorf("node: fetch %s: %w: %w", fetchedNames(dir, want), err, ErrFetch)
	}
	cli, err := mesh.NewClient(f.clientConfig(m.Checksum))
	if err != nil {
		return done, fmt.Errorf("node: fetch: %w", err)
	}
	defer cli.Close()
	for _, e := range want {
		got, err := f.file(ctx, cli, e)
		if err != nil {
			return done, err
		}
		done = append(done, got)
	}
	return done, nil
}

// missingBytes is what the file of e still needs on disk in dir: all of
// it when absent, less what a fetch cut off left of it; 0 when it is
// there (kept, or refused, by file).
func missingBytes(dir string, e partition.FileEntry) int64 {
	final := filepath.Join(dir, filepath.FromSlash(e.Path))
	if _, err := os.Stat(final); err == nil {
		return 0
	}
	need := e.Size
	if st, err := os.Stat(final + fetchSuffix); err == nil {
		need -= min(st.Size(), e.Size)
	}
	return need
}

// fetchedNames names the files of want that are not there yet, as a
// refusal of their room says them: "part-1/part.csr", "orig_ids.bin,
// part-0/part.csr and 3 more".
func fetchedNames(dir string, want []partition.FileEntry) string {
	var names []string
	for _, e := range want {
		if missingBytes(dir, e) > 0 {
			names = append(names, e.Path)
		}
	}
	if len(names) > 3 {
		return strings.Join(names[:2], ", ") + fmt.Sprintf(" and %d more", len(names)-2)
	}
	return strings.Join(names, ", ")
}

// checkRoom checks missingBytes on each file system the files of want
// go to, asking it at the nearest directory of each that exists: a part
// directory may be a link to, or a mount of, another disk than dir's.
func checkRoom(dir string, want []partition.FileEntry) error {
	need := map[uint64]int64{}
	at := map[uint64]string{}
	var devs []uint64
	for _, e := range want {
		n := missingBytes(dir, e)
		if n == 0 {
			continue
		}
		d := filepath.Dir(filepath.Join(dir, filepath.FromSlash(e.Path)))
		var st unix.Stat_t
		err := unix.Stat(d, &st)
		for errors.Is(err, unix.ENOENT) && d != filepath.Clean(dir) {
			d = filepath.Dir(d)
			err = unix.Stat(d, &st)
		}
		if err != nil {
			return fmt.Errorf("free space of %s: %w", d, err)
		}
		if _, ok := at[st.Dev]; !ok {
			at[st.Dev] = d
			devs = append(devs, st.Dev)
		}
		need[st.Dev] += n
	}
	for _, dev := range devs {
		if err := checkSpace(at[dev], need[dev]); err != nil {
			return err
		}
	}
	return nil
}

// fetcher is one Fetch.
type fetcher struct {
	cfg  *Config
	log  *slog.Logger
	opts FetchOptions
	dir  string
	id   *mesh.Identity
	// idleSince is when the fetch began or a peer last gave it bytes:
	// Wait counts from it, so a peer that goes down after a transfer
	// longer than Wait is asked again as long as one not started yet.
	idleSince time.Time
	peers     map[int]mesh.Peer // [mesh.peers] but this node
	order     []int             // their parts, the order they are asked in
}

// clientConfig is a mesh client of every peer; checksum "" makes it
// fetch-only. Each call makes one attempt: ask retries, every second,
// across the peers, from the bytes already fetched, so a try against a
// peer that is down ends after one dial (mesh.DialTimeout) and Wait
// bounds the fetch within about that much; with mesh.retries attempts
// per try it overshot by a whole call (8.8 s for --wait 1s on loopback).
func (f *fetcher) clientConfig(checksum string) mesh.ClientConfig {
	return mesh.ClientConfig{
		Identity: f.id, Cluster: f.cfg.Mesh.Cluster, Checksum: checksum,
		Part: f.cfg.ownPart(), Peers: f.peers,
		Timeout: f.cfg.MeshTimeoutDuration(), Retries: -1,
	}
}

// ask calls try with each peer in turn, in rounds, until one succeeds.
// Peers in left (nil: none) are not asked; a peer whose error matches
// mesh.ErrNotFound, mesh.ErrRefused (another partitioning or cluster:
// waiting does not heal it) or ErrFetch is not asked again; the others
// are asked again a second after a round, until opts.Wait has passed
// since the fetch began or a peer last gave it bytes. The error lists
// each peer's last failure.
func (f *fetcher) ask(ctx context.Context, what string, left map[int]bool, try func(part int) error) error {
	last := map[int]error{}
	skip := maps.Clone(left)
	if skip == nil {
		skip = map[int]bool{}
	}
	for {
		waiting := false
		for _, part := range f.order {
			if skip[part] {
				continue
			}
			err := try(part)
			if err == nil {
				return nil
			}
			var local localError
			if errors.As(err, &local) {
				return local.err
			}
			if ctx.Err() != nil {
				return fmt.Errorf("node: fetch %s: %w", what, err)
			}
			last[part] = err
			if errors.Is(err, mesh.ErrNotFound) || errors.Is(err, mesh.ErrRefused) || errors.Is(err, ErrFetch) {
				skip[part] = true
				continue
			}
			waiting = true
			f.log.Warn("fetch: peer failed; trying again (another peer first, if there is one)", "file", what, "peer_part", part, "err", err)
		}
		if !waiting {
			break
		}
		if time.Since(f.idleSince) > f.opts.Wait {
			return failures(fmt.Errorf("node: fetch %s: no peer could give it within %v: %w", what, f.opts.Wait, ErrFetch), last)
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("node: fetch %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
	why := "no peer holds it"
	for _, err := range last {
		if errors.Is(err, mesh.ErrRefused) {
			why = "no peer holds it or accepts this node (a refusal: check graph.toml, the certificates and mesh.cluster here against the peers')"
			break
		}
	}
	return failures(fmt.Errorf("node: fetch %s: %s: %w", what, why, ErrFetch), last)
}

// localError is a failure on this host (writing the file): no other
// peer can help, so the fetch stops at once.
type localError struct{ err error }

func (e localError) Error() string { return e.err.Error() }

// failures joins head and each peer's last error, in the order of parts.
func failures(head error, last map[int]error) error {
	errs := []error{head}
	for _, part := range slices.Sorted(maps.Keys(last)) {
		errs = append(errs, last[part])
	}
	return errors.Join(errs...)
}

// manifest fetches graph.toml over fetch-only connections, checks it and
// writes it.
func (f *fetcher) manifest(ctx context.Context) (*partition.Manifest, FetchedFile, error) {
	cli, err := mesh.NewClient(f.clientConfig(""))
	if err != nil {
		return nil, FetchedFile{}, fmt.Errorf("node: fetch: %w", err)
	}
	defer cli.Close()
	start := time.Now()
	var m *partition.Manifest
	var data []byte
	var from string
	err = f.ask(ctx, partition.ManifestFile, nil, func(part int) error {
		var resp mesh.FileResponse
		data = data[:0]
		for {
			req := mesh.FileRequest{Path: partition.ManifestFile, Offset: uint64(len(data)), Length: uint32(f.opts.chunk)}
			if err := cli.ReadFile(ctx, part, &req, &resp); err != nil {
				return err
			}
			if resp.Size > maxManifestBytes {
				return fmt.Errorf("node: peer of part %d: its %s has %d bytes, more than the %d a partition set's can have: %w", part, partition.ManifestFile, resp.Size, maxManifestBytes, ErrFetch)
			}
			data = append(data, resp.Data...)
			f.idleSince = time.Now()
			if uint64(len(data)) >= resp.Size {
				break
			}
		}
		from = f.peers[part].Name
		var err error
		m, err = partition.ParseManifest(data, fmt.Sprintf("%s of node %s", partition.ManifestFile, from))
		if err != nil {
			return fmt.Errorf("%w: %w", err, ErrFetch)
		}
		return nil
	})
	if err != nil {
		return nil, FetchedFile{}, err
	}
	path := filepath.Join(f.dir, partition.ManifestFile)
	w, err := openPartial(path+fetchSuffix, 0) // size 0: drops what an earlier fetch left
	if err == nil {
		err = w.write(data)
		if err == nil {
			err = w.commit(path)
		}
		w.close()
	}
	if err != nil {
		return nil, FetchedFile{}, fmt.Errorf("node: fetch %s: %w", partition.ManifestFile, err)
	}
	f.log.Info("fetched", "file", partition.ManifestFile, "from", from, "partitions", m.Parts, "checksum", m.Checksum)
	return m, FetchedFile{Path: partition.ManifestFile, Size: int64(len(data)), Fetched: int64(len(data)), From: []string{from}, Elapsed: time.Since(start)}, nil
}

// ReadFile serves a peer's FileRequest (mesh.FileHandler) from node.parts:
// graph.toml as this node read it, and the files it lists that are on
// this host with the size it records.
func (n *Node) ReadFile(_ context.Context, path string, off int64, dst []byte) (int64, int, error) {
	if path == partition.ManifestFile {
		data := n.manifestData
		if off > int64(len(data)) {
			return 0, 0, fmt.Errorf("%s: offset %d past its %d bytes", path, off, len(data))
		}
		return int64(len(data)), copy(dst, data[off:]), nil
	}
	e := n.manifest.Lookup(path)
	if e == nil {
		return 0, 0, fmt.Errorf("node %s: %s is not a file of partition set %s: %w", n.cfg.Node.Name, path, n.manifest.Checksum, mesh.ErrNotFound)
	}
	file, err := os.Open(filepath.Join(n.cfg.Node.Parts, filepath.FromSlash(path)))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, fmt.Errorf("node %s does not hold %s: %w", n.cfg.Node.Name, path, mesh.ErrNotFound)
	}
	if err != nil {
		return 0, 0, err
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return 0, 0, err
	}
	if st.Size() != e.Size {
		return 0, 0, fmt.Errorf("node %s holds %s with %d bytes, %s records %d: %w", n.cfg.Node.Name, path, st.Size(), partition.ManifestFile, e.Size, mesh.ErrNotFound)
	}
	if off > e.Size {
		return 0, 0, fmt.Errorf("%s: offset %d past its %d bytes", path, off, e.Size)
	}
	k, err := file.ReadAt(dst[:min(int64(len(dst)), e.Size-off)], off)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, 0, err
	}
	return e.Size, k, nil
}
