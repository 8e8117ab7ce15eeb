package node

// What New opens before the node serves: the partition's files, the
// manifest and its book, the mesh identity, and the binary samplers start
// from.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"graphnode/mesh"
	"graphnode/partition"
)

// selfExe names the running process's own binary (Linux): its file
// even after the path it was started from holds another.
const selfExe = "/proc/self/exe"

// samplerExecutable is what samplers are started from: the node's own
// binary, not the file now at its path. An upgrade that installs a new
// binary there while the node runs would otherwise start samplers of
// another build, which may not read this node's spec or write the
// records its trainers expect, until the node is restarted.
func samplerExecutable() (string, error) {
	if _, err := os.Stat(selfExe); err == nil {
		return selfExe, nil
	}
	return os.Executable()
}

// openSet reads graph.toml (the partition book and the partition-set
// checksum every peer must share), checks the part file against it, and
// loads the mesh identity when the node joins a mesh.
func (n *Node) openSet() error {
	m, book, err := openManifest(&n.cfg)
	if err != nil {
		return err
	}
	var enc bytes.Buffer
	if err := m.Encode(&enc); err != nil {
		return fmt.Errorf("node: node.parts: %w", err)
	}
	n.manifest, n.manifestData, n.book = m, enc.Bytes(), book
	if n.graph != nil { // a client node has no part
		meta := n.graph.Meta()
		if lo, hi := book.Range(n.cfg.Node.Part); int(meta.NumParts) != book.Parts() || meta.Start != lo || meta.End != hi {
			return fmt.Errorf("node: node.part = %d: %s owns [%d, %d) of %d parts, %s says [%d, %d) of %d: %w",
				n.cfg.Node.Part, n.part, meta.Start, meta.End, meta.NumParts, partition.ManifestFile, lo, hi, book.Parts(), ErrConfig)
		}
		if n.handler, err = newHandler(n.graph); err != nil {
			return fmt.Errorf("node: %w", err)
		}
	}
	if n.kv, err = newKVServer(&n.cfg, n.log, book, manifestNumbering(n.manifest)); err != nil {
		return err
	}
	n.kv.stopping = func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.mu.draining
	}
	if n.cfg.MeshEnabled() {
		if n.mesh.id, err = loadIdentity(&n.cfg); err != nil {
			return err
		}
	}
	return nil
}

// openManifest reads graph.toml of node.parts, checks this node's part
// file against it (graph.toml alone for a client node) and returns its
// partition book.
func openManifest(cfg *Config) (*partition.Manifest, partition.Book, error) {
	open := func(dir string) (*partition.Manifest, error) { return partition.OpenPart(dir, cfg.Node.Part) }
	if cfg.Client() {
		open = partition.OpenManifest
	}
	m, err := open(cfg.Node.Parts)
	if err != nil {
		partial := filepath.Join(cfg.Node.Parts, filepath.FromSlash(partition.PartFile(cfg.Node.Part))) + fetchSuffix
		if errors.Is(err, fs.ErrNotExist) && !cfg.Client() && exists(filepath.Join(cfg.Node.Parts, partition.ManifestFile)) {
			if st, serr := os.Stat(partial); serr == nil {
				// It said the part file was missing, and not that a fetch
				// cut off had most of it.
				err = fmt.Errorf("%w (%s holds %d bytes of it, from a fetch cut off: node fetch -c, or [node] fetch = true, goes on from them)", err, partial, st.Size())
			}
		}
		return nil, partition.Book{}, fmt.Errorf("node: node.parts: %w", err)
	}
	book, err := m.Book()
	if err != nil {
		return nil, partition.Book{}, fmt.Errorf("node: node.parts: %w", err)
	}
	return m, book, nil
}

// loadIdentity loads the node's mesh certificate, key and CA from
// mesh.certs and checks that the CA is of mesh.cluster.
func loadIdentity(cfg *Config) (*mesh.Identity, error) {
	id, err := mesh.LoadIdentity(cfg.Mesh.Certs, cfg.Node.Name)
	if err != nil {
		err = fmt.Errorf("node: mesh.certs: %w", err)
		var pe *fs.PathError
		if errors.Is(err, mesh.ErrNotYetValid) ||
			errors.As(err, &pe) && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
			// Time mends a clock that is behind (a host up before NTP
			// set it), and a read may fail once: a later start may pass.
			return nil, transientCause{err}
		}
		// Missing, unreadable, expired, of another node or CA: every
		// start fails the same way until an operator changes them.
		return nil, configCause{err}
	}
	if id.Cluster != cfg.Mesh.Cluster {
		return nil, fmt.Errorf("node: mesh.cluster = %q, but the CA in %s is of cluster %q: %w",
			cfg.Mesh.Cluster, cfg.Mesh.Certs, id.Cluster, ErrConfig)
	}
	return id, nil
}

// PartPath is the partition file of part p in a parts/ directory (DESIGN.md §4).
func PartPath(parts string, p int) string {
	return filepath.Join(parts, fmt.Sprintf("part-%d", p), "part.csr")
}

func maxDegree(indptr []uint64) int {
	m := uint64(0)
	for i := 1; i < len(indptr); i++ {
		m = max(m, indptr[i]-indptr[i-1])
	}
	return int(m)
}
