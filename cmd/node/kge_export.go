package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// Files `node kge --export DIR` writes. The arrays are also linked under
// DGL-KE's names (kgeExportFiles), so that `dglke_predict --model_path
// DIR` and other DGL-KE readers load them as they load dglke_train's:
// the score functions and row layouts are DGL-KE's (train/kge_model.go).
const (
	kgeEntityFile     = "entity.npy"     // float32 [entities, entity dim], row = the input's entity id
	kgeRelationFile   = "relation.npy"   // float32 [relations, relation dim], row = relation id
	kgeProjectionFile = "projection.npy" // transr: float32 [relations, hidden²], row = relation id, M_r row by row
	kgeConfigFile     = "config.json"
)

// kgeExport is config.json: DGL-KE's keys (those its inference reads:
// dataset, model, emb_size, gamma, double_ent, double_rel, emap_file,
// rmap_file; and how the model was trained), then what DGL-KE's lacks.
type kgeExport struct {
	Dataset   string  `json:"dataset"`
	Model     string  `json:"model"`    // DGL-KE's spelling: TransE_l2, TransE_l1, DistMult, ComplEx, RotatE, RESCAL, SimplE, TransR
	Hidden    int     `json:"emb_size"` // --hidden
	Gamma     float64 `json:"gamma"`
	DoubleEnt bool    `json:"double_ent"` // entity rows are 2 × emb_size (ComplEx, RotatE, SimplE)
	DoubleRel bool    `json:"double_rel"` // relation rows are 2 × emb_size (ComplEx, SimplE)
	// EmapFile and RmapFile are null: rows are the input's ids
	// (entities.dict, relations.dict), as DGL-KE's with built-in data.
	EmapFile    *string `json:"emap_file"`
	RmapFile    *string `json:"rmap_file"`
	EntityDim   int     `json:"entity_dim"`
	RelationDim int     `json:"relation_dim"`
	Entities    uint64  `json:"entities"`
	Relations   int     `json:"relations"`
	// How this run trained the tables; nil (its keys left out) for an
	// export of --epochs 0, whose tables an earlier job trained with
	// settings this run does not know: it wrote its own flags' defaults
	// there (batch_size 1024, max_train_step 0), describing no training.
	*KGETrained
	Last *kgeLine `json:"last_epoch,omitempty"`
}

// KGETrained is the part of config.json that says how the tables were
// trained, under DGL-KE's names of its flags. Exported for encoding/json,
// which cannot fill an embedded pointer to an unexported struct.
type KGETrained struct {
	BatchSize int     `json:"batch_size"`
	NegSize   int     `json:"neg_sample_size"`
	NegDeg    bool    `json:"neg_deg_sample"`
	LR        float64 `json:"lr"`
	MaxStep   int     `json:"max_train_step"` // epochs × steps per epoch
	Epochs    int     `json:"epochs"`
	Steps     int     `json:"steps_per_epoch"`
	Seed      uint64  `json:"seed"`
}

// dglkeModels spells each model name of train as DGL-KE does
// (dglke_train --model_name); kgeModelName reads them back.
var dglkeModels = map[string]string{"transe_l2": "TransE_l2", "transe_l1": "TransE_l1", "distmult": "DistMult",
	"complex": "ComplEx", "rotate": "RotatE", "rescal": "RESCAL", "simple": "SimplE", "transr": "TransR"}

// dglkeDoubleEnt and dglkeDoubleRel are the models whose entity and
// relation rows are twice the hidden size: DGL-KE's -de and -dr, which
// its inference reads from config.json (double_ent, double_rel) to lay
// out the rows. RESCAL's relation rows are hidden² wide, neither; so are
// TransR's projections, in their own file.
var (
	dglkeDoubleEnt = map[string]bool{"complex": true, "rotate": true, "simple": true}
	dglkeDoubleRel = map[string]bool{"complex": true, "simple": true}
)

// dglkeModelName is DGL-KE's spelling of a model name of train, or ""
// for none.
func dglkeModelName(model string) string { return dglkeModels[model] }

// kgeExportFiles lists the export's files: entity.npy, relation.npy,
// for transr projection.npy, config.json, then the arrays' DGL-KE names,
// <dataset>_<model>_entity.npy and _relation.npy (DGL-KE's
// KEModel.save_emb) and <dataset>_TransRprojection.npy (its
// TransRScore.save appends "projection" to the same prefix, without an
// underscore, and its load_emb reads that name). The graph's name must
// fit in a file name.
func kgeExportFiles(dataset, model string) ([]string, error) {
	name := dglkeModelName(model)
	switch {
	case name == "":
		return nil, fmt.Errorf("model %q has no DGL-KE name", model)
	case dataset == "" || dataset == "." || dataset == ".." || strings.ContainsAny(dataset, "/\x00"):
		return nil, fmt.Errorf("graph name %q cannot begin a file name (DGL-KE names the arrays <dataset>_<model>_entity.npy): partition again with another --name", dataset)
	}
	prefix := dataset + "_" + name
	if hasProjection(model) {
		return []string{kgeEntityFile, kgeRelationFile, kgeProjectionFile, kgeConfigFile,
			prefix + "_entity.npy", prefix + "_relation.npy", prefix + "projection.npy"}, nil
	}
	return []string{kgeEntityFile, kgeRelationFile, kgeConfigFile, prefix + "_entity.npy", prefix + "_relation.npy"}, nil
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
func prepareKGEExport(dir string, files []string) error {
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
	for _, name := range files {
		if st, err := os.Stat(filepath.Join(dir, name)); err == nil && st.IsDir() {
			return fmt.Errorf("%s is a directory, where the export writes a file", name)
		}
	}
	return nil
}

// writeKGEExport writes the arrays (proj, of projDim, for a model with a
// projection table; nil otherwise) and config.json into dir (created if
// missing) and links the arrays under their DGL-KE names (files, from
// kgeExportFiles), as one set: see writeExportSet.
func writeKGEExport(dir string, files []string, orig []uint64, ent []float32, entDim int, rel []float32, relDim int, proj []float32, projDim int, meta kgeExport) error {
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
	data := [][]byte{npy(byOrig, len(orig), entDim), npy(rel, meta.Relations, relDim)}
	if projDim > 0 {
		data = append(data, npy(proj, meta.Relations, projDim)) // linked, so before config.json
	}
	data = append(data, append(cfg, '\n'))
	if err := writeExportSet(dir, files, data, writeAll); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

// writeAll is writeExportSet's write outside tests.
func writeAll(f *os.File, b []byte) error {
	_, err := f.Write(b)
	return err
}

// writeExportSet writes data[i] to files[i] and makes files[len(data)+i]
// a hard link of files[i], in dir: every file and link is first made as
// a temporary beside it, the files written with write and fsynced, and
// only once all are there are they renamed into place, one after the
// other. A failure before the renames (a full disk, where an export
// fails) removes the temporaries and leaves what dir held as it was; a
// reader during the renames, or a crash or a failing rename among them,
// can still see some files of each set (only replacing the whole
// directory would close that). Its errors name the file as it would
// have been, not the temporary.
func writeExportSet(dir string, files []string, data [][]byte, write func(*os.File, []byte) error) (err error) {
	tmps := make([]string, 0, len(files)) // tmps[i] becomes files[i]; "" once renamed
	defer func() {
		if err != nil {
			for _, tmp := range tmps {
				if tmp != "" {
					os.Remove(tmp)
				}
			}
		}
	}()
	for i, b := range data {
		tmp, err := writeTemp(filepath.Join(dir, files[i]), b, write)
		if err != nil {
			return err
		}
		tmps = append(tmps, tmp)
	}
	for i, link := range files[len(data):] {
		tmp, err := linkTemp(tmps[i], filepath.Join(dir, link))
		if err != nil {
			return err
		}
		tmps = append(tmps, tmp)
	}
	for i, tmp := range tmps {
		if err := os.Rename(tmp, filepath.Join(dir, files[i])); err != nil {
			return err
		}
		tmps[i] = ""
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil { // the renames
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// linkTemp makes a temporary beside path that is a hard link of file,
// for a rename onto path, and returns its name.
func linkTemp(file, path string) (string, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return "", fmt.Errorf("link %s: %w", path, err)
	}
	tmp.Close()
	if err := os.Remove(tmp.Name()); err != nil {
		return "", err
	}
	if err := os.Link(file, tmp.Name()); err != nil {
		return "", fmt.Errorf("link %s: %w", path, err)
	}
	return tmp.Name(), nil
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

// writeTemp writes b with write to a temporary beside path, fsynced and
// readable by all, for a rename onto path, and returns its name; on an
// error nothing is left.
func writeTemp(path string, b []byte, write func(*os.File, []byte) error) (name string, err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return "", fmt.Errorf("create %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = write(f, b); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return "", fmt.Errorf("sync %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Chmod(f.Name(), 0o644); err != nil {
		return "", err
	}
	return f.Name(), nil
}
