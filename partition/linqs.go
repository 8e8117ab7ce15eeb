package partition

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A LINQS citation graph (Cora, CiteSeer) is two TAB-separated files:
//
//	<name>.content   paper_id \t f_1 \t ... \t f_D \t class_label
//	<name>.cites     cited_id \t citing_id
//
// Ids are strings (CiteSeer mixes "100157" and "ben-ameur02multiitem"), so
// IDs.Names holds them, in .content order. The features are '0'/'1' (any
// float is accepted). Class names are sorted (numerically if they are all
// integers) so that class numbers do not depend on line order.
//
// The line `A \t B` of .cites says that B cites A; the edge is B -> A
// (citing -> cited, Src = B, Dst = A), the direction of the citation. An
// endpoint that is not in .content is dangling (ReadOptions.Dangling); an
// added node has a zero feature row and no label.
//
// Path is the directory holding exactly one *.content, or either file.
// Each file may be gzip-compressed, with or without a ".gz" suffix.
func readLINQS(ctx context.Context, path string, opts ReadOptions) (*Graph, error) {
	content, cites, err := linqsFiles(path)
	if err != nil {
		return nil, err
	}
	g := &Graph{}
	names := newNameIDs(0)
	labels := newNameIDs(0)
	var tok []uint32 // label name index of each node
	fields := make([][]byte, 0, 64)
	var firstLine int64 // the line that set FeatDim
	err = scanFile(ctx, content, opts.Progress, func(s *lineScanner, line []byte) error {
		if len(line) == 0 {
			return nil
		}
		fields = splitTabs(line, fields[:0])
		if g.FeatDim == 0 {
			if len(fields) < 3 {
				return s.errorf("want id, features and label, got %d fields", len(fields))
			}
			g.FeatDim = len(fields) - 2
			g.Feat = make([]float32, 0, estimateRows(s, line)*g.FeatDim)
			firstLine = s.line
		}
		if len(fields) != g.FeatDim+2 {
			// The first line sets the width, and may be the short one.
			return s.errorf("got %d fields, line %d has %d (id, %d features, label)", len(fields), firstLine, g.FeatDim+2, g.FeatDim)
		}
		if len(fields[0]) == 0 {
			return s.errorf("empty paper id (the first field)")
		}
		if _, dup := names.lookup(fields[0]); dup {
			return s.errorf("paper %q listed twice", fields[0])
		}
		if len(fields[len(fields)-1]) == 0 {
			// It became a class named "" beside the real ones.
			return s.errorf("paper %q: empty label (the last field)", fields[0])
		}
		if msg := nameFault("paper id", NamesFile, fields[0]); msg != "" {
			return s.errorf("%s", msg)
		}
		names.add(string(fields[0]))
		for k, f := range fields[1 : len(fields)-1] {
			v, ok := float32(0), true
			switch {
			case len(f) == 1 && f[0] == '0':
			case len(f) == 1 && f[0] == '1':
				v = 1
			default:
				v, ok = parseFloat32(f)
			}
			if !ok {
				return s.errorf("feature %d: %q is not a number", k+1, f)
			}
			if !finite32(v) {
				return s.errorf("feature %d: %q is not a finite number", k+1, f)
			}
			g.Feat = append(g.Feat, v)
		}
		tok = append(tok, labels.intern(fields[len(fields)-1]))
		return nil
	})
	if err != nil {
		return nil, err
	}
	known := len(names.names)

	err = scanFile(ctx, cites, opts.Progress, func(s *lineScanner, line []byte) error {
		if len(line) == 0 {
			return nil
		}
		fields = splitTabs(line, fields[:0])
		if len(fields) != 2 {
			return s.errorf("want 2 fields (cited, citing), got %d", len(fields))
		}
		g.Stats.Lines++
		g.Stats.EdgesRead++
		cited, okA := names.lookup(fields[0])
		citing, okB := names.lookup(fields[1])
		if !okA || !okB {
			g.Stats.Dangling++
			switch opts.Dangling {
			case Error:
				bad := fields[0]
				if okA {
					bad = fields[1]
				}
				return s.errorf("paper %q is not in %s", bad, content)
			case Add:
				for _, id := range fields {
					if msg := nameFault("paper id", NamesFile, id); msg != "" {
						return s.errorf("%s", msg)
					}
				}
				cited, citing = names.intern(fields[0]), names.intern(fields[1])
			default:
				g.Stats.DanglingDrop++
				return nil
			}
		}
		if cited == citing {
			g.Stats.SelfLoops++
		}
		g.Src = append(g.Src, citing)
		g.Dst = append(g.Dst, cited)
		return nil
	})
	if err != nil {
		return nil, err
	}

	g.NumNodes = len(names.names)
	g.IDs.Names = names.names
	g.Feat = append(g.Feat, make([]float32, (g.NumNodes-known)*g.FeatDim)...)
	classOf, classNames := classes(labels.names)
	g.LabelDim, g.NumClasses, g.ClassNames = 1, len(classNames), classNames
	g.Labels = make([]int32, g.NumNodes)
	for i := range g.Labels {
		g.Labels[i] = -1
		if i < known {
			g.Labels[i] = classOf[tok[i]]
		}
	}
	err = missingLabels(g, opts, cites, func(i uint32) string { return fmt.Sprintf("%q", names.names[i]) })
	if err != nil {
		return nil, err
	}
	return g, nil
}

// linqsFiles finds the .content and .cites files for path.
func linqsFiles(path string) (content, cites string, err error) {
	base := path
	if st, err := os.Stat(path); err != nil {
		return "", "", fmt.Errorf("partition: %w", err)
	} else if st.IsDir() {
		m, _ := filepath.Glob(filepath.Join(path, "*.content"))
		gz, _ := filepath.Glob(filepath.Join(path, "*.content.gz"))
		m = append(m, gz...)
		if len(m) != 1 {
			return "", "", formatErrorf("%s: want one *.content file, found %d", path, len(m))
		}
		base = m[0]
	}
	base = strings.TrimSuffix(base, ".gz")
	base = strings.TrimSuffix(strings.TrimSuffix(base, ".content"), ".cites")
	if content, err = existing(base + ".content"); err != nil {
		return "", "", err
	}
	if cites, err = existing(base + ".cites"); err != nil {
		return "", "", err
	}
	return content, cites, nil
}

// existing is name, or name.gz when only that exists; both is an error.
func existing(name string) (string, error) {
	_, plain := os.Stat(name)
	_, gz := os.Stat(name + ".gz")
	switch {
	case plain == nil && gz == nil:
		// The plain one was read, the other ignored without a word,
		// though it may be the newer download.
		return "", formatErrorf("both %s and %s.gz: keep the one to read and move the other away", name, name)
	case plain == nil:
		return name, nil
	case gz == nil:
		return name + ".gz", nil
	}
	return "", fmt.Errorf("partition: %s: no such file (nor %s.gz): %w", name, name, os.ErrNotExist)
}

// splitTabs appends the TAB-separated fields of line to out.
func splitTabs(line []byte, out [][]byte) [][]byte {
	for {
		i := bytes.IndexByte(line, '\t')
		if i < 0 {
			return append(out, line)
		}
		out = append(out, line[:i])
		line = line[i+1:]
	}
}

// estimateRows guesses a file's line count from its size and the length of
// its first line, for presizing (capped: the guess is only a capacity).
func estimateRows(s *lineScanner, first []byte) int {
	size := s.in.size
	if s.in.gz != nil {
		size *= 4
	}
	return int(min(size/int64(len(first)+1)+16, 1<<26))
}
