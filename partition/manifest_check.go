package partition

// Checking a manifest: its content (Validate) and the files it lists on
// disk, each problem named with its key.

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"graphnode/csr"
)

// Validate checks the manifest's content (not the files on disk) and
// reports every problem, joined.
func (m *Manifest) Validate() error { return errors.Join(m.problems(ManifestFile)...) }

// problems lists what is wrong with the manifest's content.
func (m *Manifest) problems(file string) []error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("partition: %s: key %q: %s: %w", file, key, fmt.Sprintf(format, a...), ErrManifest))
	}
	if m.Version != ManifestVersion {
		bad("version", "is %d, this build reads version %d", m.Version, ManifestVersion)
	}
	// TOML text is UTF-8: a name that is not would be encoded as it is
	// and make the file unreadable.
	if !utf8.ValidString(m.Name) {
		bad("name", "%q is not UTF-8", m.Name)
	}
	for i, c := range m.ClassNames {
		if !utf8.ValidString(c) {
			bad(fmt.Sprintf("class_names[%d]", i), "%q is not UTF-8", c)
		}
	}
	if m.Seed > math.MaxInt64 {
		bad("seed", "%d does not fit a TOML integer", m.Seed)
	}
	if m.Direction != "in" && m.Direction != "out" {
		bad("direction", "is %q, want \"in\" or \"out\"", m.Direction)
	}
	if m.IDKind != "int" && m.IDKind != "string" {
		bad("id_kind", "is %q, want \"int\" or \"string\"", m.IDKind)
	}
	switch {
	case m.FeatDim < 0:
		bad("feat_dim", "is %d, negative", m.FeatDim)
	case m.FeatDim == 0 && m.FeatDtype != "":
		bad("feat_dtype", "is %q without features (feat_dim = 0)", m.FeatDtype)
	case m.FeatDim > 0 && m.FeatDtype != "f32" && m.FeatDtype != "f16":
		bad("feat_dtype", "is %q, want \"f32\" or \"f16\"", m.FeatDtype)
	}
	if m.LabelDim < 0 {
		bad("label_dim", "is %d, negative", m.LabelDim)
	}
	if m.Classes < 0 {
		bad("classes", "is %d, negative", m.Classes)
	}
	if len(m.ClassNames) > 0 && len(m.ClassNames) != m.Classes {
		bad("class_names", "has %d names for %d classes", len(m.ClassNames), m.Classes)
	}
	for k := range m.Stats {
		if _, ok := StatsMap(Stats{})[k]; !ok {
			bad("stats."+k, "unknown counter")
		}
	}
	if m.Parts < 1 {
		bad("parts", "is %d, want at least 1", m.Parts)
	}
	errs = append(errs, m.estimateProblems(file)...)
	if len(m.Part) != m.Parts {
		bad("part", "has %d entries for parts = %d", len(m.Part), m.Parts)
	}
	var edges, train, val, test, end uint64
	for i, p := range m.Part {
		key := fmt.Sprintf("part[%d]", i)
		if p.Index != i {
			bad(key+".index", "is %d, want %d", p.Index, i)
		}
		if p.Start != end {
			bad(key+".start", "is %d, want %d (where the previous range ends)", p.Start, end)
		}
		if p.End < p.Start {
			bad(key+".end", "is %d, before start %d", p.End, p.Start)
		}
		if n := p.End - p.Start; p.End >= p.Start && p.Train > n {
			bad(key+".train", "is %d, more than the %d owned nodes", p.Train, n)
		}
		if p.MaxDegree > p.Edges {
			bad(key+".max_degree", "is %d, more than the part's %d edges", p.MaxDegree, p.Edges)
		}
		if _, err := hex.DecodeString(p.HeaderCRC); p.HeaderCRC != "" && (err != nil || len(p.HeaderCRC) != 8) {
			bad(key+".header_crc32c", "%q is not 8 hex digits", p.HeaderCRC)
		}
		end = p.End
		edges += p.Edges
		train += p.Train
		val += p.Val
		test += p.Test
	}
	if len(m.Part) > 0 && end != m.Nodes {
		bad(fmt.Sprintf("part[%d].end", len(m.Part)-1), "is %d, want nodes = %d", end, m.Nodes)
	}
	for _, c := range []struct {
		key       string
		sum, want uint64
	}{{"edges", edges, m.Edges}, {"train", train, m.Train}, {"val", val, m.Val}, {"test", test, m.Test}} {
		if c.sum != c.want {
			bad(c.key, "is %d, but the partitions' %s add up to %d", c.want, c.key, c.sum)
		}
	}
	if len(errs) == 0 {
		errs = append(errs, m.achievedProblems(file)...)
	}
	if m.Checksum == "" {
		bad("checksum", "missing")
	} else if h, err := m.contentHash(); err != nil {
		bad("checksum", "%v", err)
	} else if h != m.Checksum {
		bad("checksum", "is %s, but the content hashes to %s", m.Checksum, h)
	}
	return errs
}

// requiredFiles lists the files the manifest must list. Part files are
// required for the [[part]] entries there are: a parts count that does not
// match them is reported once, under "part", and a wrong one (parts =
// 4000000000) must not list, nor allocate, a file for each.
func (m *Manifest) requiredFiles() []string {
	req := []string{OrigIDsFile}
	for p := range min(m.Parts, len(m.Part)) {
		req = append(req, PartFile(p))
	}
	if m.IDKind == "string" {
		req = append(req, NamesFile)
	}
	if m.Relations > 0 {
		req = append(req, RelationsFile)
	}
	return req
}

// fileProblems checks the file list against the directory.
func (m *Manifest) fileProblems(dir, file string, onDisk func(string) bool) []error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("partition: %s: key %q: %s: %w", file, key, fmt.Sprintf(format, a...), ErrManifest))
	}
	seen := make(map[string]bool)
	for i, f := range m.File {
		key := fmt.Sprintf("file[%d]", i)
		if f.Path == "" || path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "." || f.Path == ".." ||
			strings.HasPrefix(f.Path, "../") || f.Path == ManifestFile {
			bad(key+".path", "%q is not a file inside the directory", f.Path)
			continue
		}
		if seen[f.Path] {
			bad(key+".path", "%q is listed twice", f.Path)
		}
		seen[f.Path] = true
		if _, err := hex.DecodeString(f.CRC32C); err != nil || len(f.CRC32C) != 8 {
			bad(key+".crc32c", "%q for %s is not 8 hex digits", f.CRC32C, f.Path)
		}
		if onDisk(f.Path) {
			// A file on disk that disagrees with graph.toml is named
			// first, as csr.Open names it: graph.toml (whose checksum
			// holds) is right, the file is what to repair or copy again.
			p := filepath.Join(dir, filepath.FromSlash(f.Path))
			st, err := os.Stat(p)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				errs = append(errs, fmt.Errorf("partition: %s: missing (%s key %q lists it): %w", p, ManifestFile, key+".path", fs.ErrNotExist))
			case err != nil:
				var pe *fs.PathError
				if errors.As(err, &pe) {
					err = pe.Err // the path is named once
				}
				errs = append(errs, fmt.Errorf("partition: %s (%s key %q lists it): %w", p, ManifestFile, key+".path", err))
			case !st.Mode().IsRegular():
				errs = append(errs, fmt.Errorf("partition: %s: not a regular file (%s), %s key %q lists a file: %w", p, st.Mode(), ManifestFile, key+".path", csr.ErrCorrupt))
			case st.Size() != f.Size:
				errs = append(errs, fmt.Errorf("partition: %s: %d bytes on disk, %s key %q records %d (truncated, or replaced by another file): %w", p, st.Size(), ManifestFile, key+".size", f.Size, csr.ErrCorrupt))
			default:
				if err := m.headerProblem(dir, f.Path); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if f.Path == OrigIDsFile && f.Size != int64(8*m.Nodes) {
			bad(key+".size", "%s records %d bytes, want 8 × %d nodes", f.Path, f.Size, m.Nodes)
		}
	}
	for _, p := range m.requiredFiles() {
		if !seen[p] {
			bad("file", "%s is not listed", p)
		}
	}
	return errs
}
