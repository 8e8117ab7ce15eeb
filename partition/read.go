package partition

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Input formats, the values of ReadOptions.Format.
const (
	FormatEdgeList  = "edgelist"  // src dst [weight] per line; see edgelist.go
	FormatLINQS     = "linqs"     // <name>.content + <name>.cites (Cora, CiteSeer)
	FormatKG        = "kg"        // entities.dict, relations.dict, train/valid/test.txt
	FormatOGB       = "ogb"       // OGB node-property raw layout: raw/*.csv[.gz], split/
	FormatMETIS     = "metis"     // METIS graph file
	FormatPlanetoid = "planetoid" // ind.<name>.{x,y,tx,ty,allx,ally,graph,test.index}
)

// Formats lists the formats Read accepts.
func Formats() []string {
	return []string{FormatEdgeList, FormatLINQS, FormatKG, FormatOGB, FormatMETIS, FormatPlanetoid}
}

// Values of ReadOptions.Header.
const (
	HeaderAuto = ""    // skip a first line none of whose fields is a number, when ids are integers
	HeaderYes  = "yes" // the first data line is a header
	HeaderNo   = "no"  // there is no header
)

// Values of ReadOptions.IDs.
const (
	IDsAuto   = ""       // integers until an id is not one, then strings
	IDsInt    = "int"    // decimal integers; anything else is an error
	IDsString = "string" // every id is a name, "007" and "7" differ
)

// ReadOptions says how Read reads an input. The zero value reads an edge
// list with default policies.
type ReadOptions struct {
	Format string // one of Formats(); "" = DetectFormat(path)
	Name   string // Graph.Name; "" = the base name of the path (Planetoid: also picks ind.<Name>.*)

	// Edge lists.
	Weighted  bool   // the third column is an edge weight
	Header    string // HeaderAuto, HeaderYes, HeaderNo
	IDs       string // IDsAuto, IDsInt, IDsString
	NodeFile  string // one id per line: adds isolated nodes, defines the known nodes
	LabelFile string // "id label" lines; an id given twice or more is multi-label; label -1 or nan: none

	// Policies: Dangling is for an edge endpoint (or label id) that is not a
	// known node: Drop (default), Add or Error. MissingLabel is for a node
	// without a label when labels are read: Keep (default, label -1) or
	// Error.
	Dangling     Policy
	MissingLabel Policy
	// EvalRepeats is for a knowledge graph's valid or test triple that
	// repeats one before it in its file: Drop (default), Keep or Error
	// (node partition passes its --duplicates).
	EvalRepeats Policy

	SplitScheme string // OGB: the folder under split/; "" = the only one

	Progress Progress // bytes read of the file's size on disk; may be nil
}

// Validate reports every bad field, joined.
func (o *ReadOptions) Validate() error {
	var errs []error
	if o.Format != "" && !slices.Contains(Formats(), o.Format) {
		errs = append(errs, fmt.Errorf("partition: format %q: want one of %s", o.Format, strings.Join(Formats(), ", ")))
	}
	if o.Header != HeaderAuto && o.Header != HeaderYes && o.Header != HeaderNo {
		errs = append(errs, fmt.Errorf("partition: header %q: want yes, no or empty (auto)", o.Header))
	}
	if o.IDs != IDsAuto && o.IDs != "auto" && o.IDs != IDsInt && o.IDs != IDsString {
		errs = append(errs, fmt.Errorf("partition: ids %q: want auto, int or string", o.IDs))
	}
	if o.Dangling != "" {
		if _, err := ParsePolicy(string(o.Dangling), Drop, Add, Error); err != nil {
			errs = append(errs, fmt.Errorf("%w (dangling)", err))
		}
	}
	if o.MissingLabel != "" {
		if _, err := ParsePolicy(string(o.MissingLabel), Keep, Error); err != nil {
			errs = append(errs, fmt.Errorf("%w (missing label)", err))
		}
	}
	if o.EvalRepeats != "" {
		if _, err := ParsePolicy(string(o.EvalRepeats), Drop, Keep, Error); err != nil {
			errs = append(errs, fmt.Errorf("%w (repeated evaluation triples)", err))
		}
	}
	if o.Format != "" {
		errs = append(errs, o.formatProblems(o.Format, "")...)
	}
	return errors.Join(errs...)
}

// ValidateFor is Validate for the input at path: when Format is empty,
// it also reports the options given that the format guessed from path
// does not read, as Read would refuse them, so that a caller can refuse
// them with the other bad options before reading. A path whose format
// cannot be guessed (it does not exist) is left to Read to report.
func (o *ReadOptions) ValidateFor(path string) error {
	err := o.Validate()
	if o.Format != "" {
		return err
	}
	guessed, gerr := DetectFormat(path)
	if gerr != nil {
		return err
	}
	return errors.Join(append([]error{err}, o.formatProblems(guessed, path)...)...)
}

// formatProblems lists the options given that format does not read;
// guessedFrom is the path the format was guessed from, or "".
func (o *ReadOptions) formatProblems(format, guessedFrom string) []error {
	var errs []error
	how := ""
	if guessedFrom != "" {
		how = fmt.Sprintf(" (guessed from %s; --format sets it)", guessedFrom)
	}
	if format != FormatEdgeList {
		for _, opt := range []struct {
			name  string
			given bool
		}{
			{"node file", o.NodeFile != ""},
			{"label file", o.LabelFile != ""},
			{"weighted", o.Weighted},
			{"header", o.Header == HeaderYes || o.Header == HeaderNo},
			{"ids", o.IDs == IDsInt || o.IDs == IDsString},
		} {
			if opt.given {
				errs = append(errs, fmt.Errorf("partition: %s applies to edge lists only, not %s%s", opt.name, format, how))
			}
		}
	}
	if format != FormatOGB && o.SplitScheme != "" {
		errs = append(errs, fmt.Errorf("partition: split scheme applies to ogb only, not %s%s", format, how))
	}
	if format != FormatEdgeList && format != FormatLINQS && o.Dangling != "" {
		errs = append(errs, fmt.Errorf("partition: dangling applies to edge lists and linqs only, not %s%s: an id it does not know is always an error there", format, how))
	}
	return errs
}

// dirLayout is what a format that reads a directory reads in it, and ""
// for the formats that read files (LINQS reads either).
func dirLayout(format string) string {
	switch format {
	case FormatKG:
		return "entities.dict, relations.dict, train.txt"
	case FormatOGB:
		return "raw/, split/"
	}
	return ""
}

// Read reads the graph at path in opts.Format. Every reader streams its
// files, decompresses gzip (detected by content, not name), checks ctx
// every 64K lines, and reports a bad line as "path:line: what is wrong"
// (a *LineError, which wraps ErrFormat). Readers count what they see in
// Graph.Stats but neither drop self loops nor duplicates nor add reverse
// edges: Clean does that.
func Read(ctx context.Context, path string, opts ReadOptions) (*Graph, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.IDs == "auto" {
		opts.IDs = IDsAuto
	}
	if opts.MissingLabel == "" {
		opts.MissingLabel = Keep
	}
	if opts.Format == "" {
		f, err := DetectFormat(path)
		if err != nil {
			return nil, err
		}
		if err := errors.Join(opts.formatProblems(f, path)...); err != nil {
			return nil, err
		}
		opts.Format = f
	}
	if opts.Dangling == "" { // after formatProblems, which refuses a given one where it has no use
		opts.Dangling = Drop
	}
	// A file given to a format of directories, or the other way round,
	// failed in the reader with a path inside the file
	// (train.txt/entities.dict) or "is a directory".
	if st, err := os.Stat(path); err == nil {
		switch layout := dirLayout(opts.Format); {
		case st.IsDir() && (opts.Format == FormatEdgeList || opts.Format == FormatMETIS):
			return nil, formatErrorf("%s: a directory, but format %s reads a file", path, opts.Format)
		case !st.IsDir() && layout != "":
			return nil, formatErrorf("%s: a file, but format %s reads a directory (%s)", path, opts.Format, layout)
		}
	}
	var g *Graph
	var err error
	switch opts.Format {
	case FormatEdgeList:
		g, err = readEdgeList(ctx, path, opts)
	case FormatLINQS:
		g, err = readLINQS(ctx, path, opts)
	case FormatKG:
		g, err = readKG(ctx, path, opts)
	case FormatOGB:
		g, err = readOGB(ctx, path, opts)
	case FormatMETIS:
		g, err = readMETISFile(ctx, path, opts)
	case FormatPlanetoid:
		g, err = readPlanetoid(ctx, path, opts)
	}
	if err != nil {
		return nil, err
	}
	if g.Name = opts.Name; g.Name == "" {
		g.Name = graphName(path)
	}
	return g, nil
}

// graphName is the base name of path without its extensions. path is
// made absolute first, so that "." and "./" name the directory they
// are, not "." (which no export can begin a file name with).
func graphName(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	base := filepath.Base(filepath.Clean(path))
	if i := strings.IndexByte(base, '.'); i > 0 {
		base = base[:i]
	}
	return base
}

// DetectFormat guesses the format of path: a directory with raw/ is OGB,
// with entities.dict a knowledge graph, with *.content a LINQS graph
// (either gzipped, with .gz), with ind.<name>.* files Planetoid, and
// else with train.txt a knowledge graph without dictionaries; a file
// named ind.<name>.<suffix> of Planetoid is Planetoid, *.content or
// *.cites LINQS, *.graph or *.metis METIS (with or without .gz), and
// anything else an edge list.
func DetectFormat(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("partition: %w", err)
	}
	if !st.IsDir() {
		if planetoidName(path) != "" {
			return FormatPlanetoid, nil
		}
		name := strings.TrimSuffix(filepath.Base(path), ".gz")
		switch filepath.Ext(name) {
		case ".content", ".cites":
			return FormatLINQS, nil
		case ".graph", ".metis":
			return FormatMETIS, nil
		}
		return FormatEdgeList, nil
	}
	if st, err := os.Stat(filepath.Join(path, "raw")); err == nil && st.IsDir() {
		return FormatOGB, nil
	}
	// Each file may be gzipped, as the readers take it.
	if _, err := existing(filepath.Join(path, "entities.dict")); err == nil {
		return FormatKG, nil
	}
	for _, pat := range []string{"*.content", "*.content.gz"} {
		if m, _ := filepath.Glob(filepath.Join(path, pat)); len(m) > 0 {
			return FormatLINQS, nil
		}
	}
	if len(planetoidNames(path)) > 0 {
		return FormatPlanetoid, nil
	}
	// A knowledge graph without dictionaries (DGL-KE's raw_udd layout).
	if _, err := existing(filepath.Join(path, "train.txt")); err == nil {
		return FormatKG, nil
	}
	return "", formatErrorf("%s: a directory, but not OGB (raw/), KG (entities.dict[.gz] or train.txt[.gz]), LINQS (*.content[.gz]) or Planetoid (ind.<name>.*); set the format", path)
}

// classes orders label names: numerically when all are integers (equal
// values, such as "7" and "07", are one class), else lexically. classOf[i]
// is the class of names[i]; classNames[c] the name of class c.
func classes(names []string) (classOf []int32, classNames []string) {
	type tok struct {
		name string
		v    int64
		i    int
	}
	toks := make([]tok, len(names))
	numeric := true
	for i, n := range names {
		v, err := strconv.ParseInt(n, 10, 64)
		numeric = numeric && err == nil
		toks[i] = tok{n, v, i}
	}
	slices.SortFunc(toks, func(a, b tok) int {
		if numeric && a.v != b.v {
			return cmpInt64(a.v, b.v)
		}
		return strings.Compare(a.name, b.name)
	})
	classOf = make([]int32, len(names))
	for k, t := range toks {
		same := k > 0 && (numeric && t.v == toks[k-1].v || t.name == toks[k-1].name)
		if !same {
			classNames = append(classNames, t.name)
		}
		classOf[t.i] = int32(len(classNames) - 1)
	}
	return classOf, classNames
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// missingLabels counts nodes whose label row is all -1 and applies the
// MissingLabel policy; what names the input for the error.
func missingLabels(g *Graph, opts ReadOptions, what string, name func(uint32) string) error {
	d := g.LabelDim
	for i := range g.NumNodes {
		if g.Labels[i*d] != -1 {
			continue
		}
		g.Stats.MissingLabels++
		if opts.MissingLabel == Error {
			return formatErrorf("%s: node %s has no label", what, name(uint32(i)))
		}
	}
	return nil
}

// labelFile holds the lines of a label file ("id label", any edge-list
// separator) until the node set is final. A label "-1" or "nan" (any
// case) says that the node has none, as in OGB's node-label.csv and
// PyG's and DGL's -1: it is no class, and the line only names the node.
type labelFile struct {
	path  string
	pairs []labelPair
	toks  *nameIDs // label names in first-seen order
}

type labelPair struct {
	id   string
	line int64
	tok  uint32 // noLabel: the line marks the node unlabelled
}

// noLabel is the token of a label that marks a node unlabelled.
const noLabel = math.MaxUint32

// isNoLabel reports whether a label file's label marks no label.
func isNoLabel(b []byte) bool {
	return string(b) == "-1" || bytes.EqualFold(b, []byte("nan"))
}

// nodeLabel is a label pair resolved to a node index.
type nodeLabel struct{ node, tok uint32 }

func (l *labelFile) read(ctx context.Context, path string, progress Progress) error {
	l.path, l.toks = path, newNameIDs(0)
	var f [edgeSplit][]byte
	return scanFile(ctx, path, progress, func(s *lineScanner, line []byte) error {
		if isComment(line) {
			return nil
		}
		n, msg := splitFields(line, &f)
		if msg == "" && n != 2 {
			msg = "want 2 fields (id label), got " + strconv.Itoa(n)
		}
		if msg != "" {
			return s.errorf("%s", msg)
		}
		tok := uint32(noLabel)
		if !isNoLabel(f[1]) {
			tok = l.toks.intern(f[1])
		}
		l.pairs = append(l.pairs, labelPair{id: string(f[0]), line: s.line, tok: tok})
		return nil
	})
}

func (l *labelFile) errorf(p labelPair, format string, args ...any) error {
	return &LineError{File: l.path, Line: p.line, Msg: fmt.Sprintf(format, args...)}
}

// apply sets g's labels from resolved pairs: one class per node (LabelDim
// 1) unless some node has two or more distinct labels, then multi-hot rows
// of NumClasses (LabelDim = NumClasses). A node without a label gets a row
// of -1 and is counted (MissingLabel policy).
func (l *labelFile) apply(g *Graph, opts ReadOptions, res []nodeLabel, name func(uint32) string) error {
	res = slices.DeleteFunc(res, func(p nodeLabel) bool { return p.tok == noLabel })
	classOf, names := classes(l.toks.names)
	c := len(names)
	slices.SortFunc(res, func(a, b nodeLabel) int {
		if a.node != b.node {
			return cmpInt64(int64(a.node), int64(b.node))
		}
		return cmpInt64(int64(classOf[a.tok]), int64(classOf[b.tok]))
	})
	multi := false
	for k := 1; k < len(res); k++ {
		if res[k].node == res[k-1].node && classOf[res[k].tok] != classOf[res[k-1].tok] {
			multi = true
			break
		}
	}
	g.NumClasses, g.ClassNames, g.LabelDim = c, names, 1
	if multi {
		g.LabelDim = c
	}
	d := g.LabelDim
	g.Labels = make([]int32, g.NumNodes*d)
	for i := range g.Labels {
		g.Labels[i] = -1
	}
	for k, p := range res {
		row := g.Labels[int(p.node)*d : int(p.node+1)*d]
		if !multi {
			row[0] = classOf[p.tok]
			continue
		}
		if k == 0 || res[k-1].node != p.node {
			clear(row) // first label of this node: the row becomes 0/1
		}
		row[classOf[p.tok]] = 1
	}
	return missingLabels(g, opts, l.path, name)
}
