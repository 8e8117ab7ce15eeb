package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// Files `node kge --export DIR` writes (DGL-KE saves the same two arrays
// as <dataset>_<model>_entity.npy / _relation.npy).
const (
	kgeEntityFile   = "entity.npy"   // float32 [entities, entity dim], row = the input's entity id
	kgeRelationFile = "relation.npy" // float32 [relations, relation dim], row = relation id
	kgeConfigFile   = "config.json"
)

// kgeExport is config.json: what a reader of the arrays needs to score
// with them, and how they were trained.
type kgeExport struct {
	Dataset     string   `json:"dataset"`
	Model       string   `json:"model"`
	Hidden      int      `json:"hidden"`
	Gamma       float64  `json:"gamma"`
	EntityDim   int      `json:"entity_dim"`
	RelationDim int      `json:"relation_dim"`
	Entities    uint64   `json:"entities"`
	Relations   int      `json:"relations"`
	Epochs      int      `json:"epochs"`
	Steps       int      `json:"steps_per_epoch"`
	BatchSize   int      `json:"batch_size"`
	NegSize     int      `json:"neg_size"`
	LR          float64  `json:"lr"`
	Seed        uint64   `json:"seed"`
	Last        *kgeLine `json:"last_epoch,omitempty"`
}

// checkOrigIDs checks that orig maps the new ids onto 0..n-1, the input's
// entity ids, one to one: the export writes row orig[i] from new id i.
func checkOrigIDs(orig []uint64) error {
	seen := make([]bool, len(orig))
	for i, o := range orig {
		if o >= uint64(len(orig)) || seen[o] {
			return fmt.Errorf("orig_ids.bin: new id %d maps to %d: not a permutation of 0..%d", i, o, len(orig)-1)
		}
		seen[o] = true
	}
	return nil
}

// prepareKGEExport makes dir (and its parents) and checks that the files
// of an export can be written into it, before training: a directory that
// cannot be made or written, or that holds a directory by the name of one
// of the files, failed the export only once training was over, its
// embeddings then left in the nodes' tables alone.
func prepareKGEExport(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	probe, err := os.CreateTemp(dir, ".export-probe-")
	if err != nil {
		return fmt.Errorf("not writable: %w", err)
	}
	probe.Close()
	if err := os.Remove(probe.Name()); err != nil {
		return err
	}
	for _, name := range []string{kgeEntityFile, kgeRelationFile, kgeConfigFile} {
		if st, err := os.Stat(filepath.Join(dir, name)); err == nil && st.IsDir() {
			return fmt.Errorf("%s is a directory, where the export writes a file", name)
		}
	}
	return nil
}

// writeKGEExport writes the arrays and config.json into dir (created if
// missing), each file through a temporary, fsynced and renamed, so a
// reader sees whole files or none.
func writeKGEExport(dir string, orig []uint64, ent []float32, entDim int, rel []float32, relDim int, meta kgeExport) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	byOrig := make([]float32, len(ent))
	for i, o := range orig {
		copy(byOrig[int(o)*entDim:(int(o)+1)*entDim], ent[i*entDim:(i+1)*entDim])
	}
	cfg, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{kgeEntityFile, npy(byOrig, len(orig), entDim)},
		{kgeRelationFile, npy(rel, meta.Relations, relDim)},
		{kgeConfigFile, append(cfg, '\n')},
	} {
		if err := writeFileAtomic(filepath.Join(dir, f.name), f.data); err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil { // the renames
		return fmt.Errorf("export: sync %s: %w", dir, err)
	}
	return nil
}

// npy encodes a float32 matrix in NumPy's .npy format, version 1.0: magic,
// version, a little-endian u16 header length, a Python dict literal padded
// with spaces to a multiple of 64 bytes and ended by a newline, then the
// rows, little-endian, C order.
func npy(data []float32, rows, cols int) []byte {
	header := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", rows, cols)
	pad := 64 - (10+len(header)+1)%64
	if pad == 64 {
		pad = 0
	}
	header += string(bytes.Repeat([]byte{' '}, pad)) + "\n"
	out := make([]byte, 0, 10+len(header)+4*len(data))
	out = append(out, "\x93NUMPY\x01\x00"...)
	out = binary.LittleEndian.AppendUint16(out, uint16(len(header)))
	out = append(out, header...)
	for _, x := range data {
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(x))
	}
	return out
}

// writeFileAtomic writes b to path through a temporary in the same
// directory, fsynced before the rename; on an error nothing is left.
func writeFileAtomic(path string, b []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(b); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
