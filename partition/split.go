package partition

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// SplitMode says where the train/val/test splits come from.
type SplitMode string

const (
	// SplitKeep keeps the splits the input gave (the default).
	SplitKeep SplitMode = "keep"
	// SplitRandom draws fractions of the labelled nodes at random.
	SplitRandom SplitMode = "random"
	// SplitPerClass draws a fixed number of training nodes per class,
	// then fixed numbers of validation and test nodes from the rest
	// (the Planetoid split of Cora, CiteSeer, PubMed).
	SplitPerClass SplitMode = "per-class"
)

// splitStream is the second PCG word of split draws, so that a split
// and an assignment from the same seed are independent.
const splitStream = 0x73706c6974 // "split"

// SplitOptions choose the splits. The zero value keeps the input's.
type SplitOptions struct {
	Mode SplitMode
	// Fractions of the labelled nodes for train, val, test (SplitRandom).
	// Their sum is at most 1; nodes left over are in no split.
	Fractions [3]float64
	// PerClass training nodes of each class, then Val and Test nodes
	// drawn from the remaining labelled nodes (SplitPerClass).
	PerClass, Val, Test int
	// Seed makes the draw reproducible.
	Seed uint64
}

// String is the flag form of o, as ParseSplit reads it.
func (o SplitOptions) String() string {
	switch o.Mode {
	case SplitRandom:
		return fmt.Sprintf("random:%g,%g,%g", o.Fractions[0], o.Fractions[1], o.Fractions[2])
	case SplitPerClass:
		return fmt.Sprintf("per-class:%d,%d,%d", o.PerClass, o.Val, o.Test)
	}
	return string(SplitKeep)
}

// ParseSplit reads a --split value: "keep", "random:TRAIN,VAL,TEST" with
// fractions (random:0.8,0.1,0.1), or "per-class:TRAIN,VAL,TEST" with
// counts (per-class:20,500,1000). The seed is set by the caller.
func ParseSplit(s string) (SplitOptions, error) {
	mode, args, hasArgs := strings.Cut(s, ":")
	bad := func(format string, a ...any) (SplitOptions, error) {
		return SplitOptions{}, fmt.Errorf("partition: split %q: %s", s, fmt.Sprintf(format, a...))
	}
	switch SplitMode(mode) {
	case "", SplitKeep:
		if hasArgs {
			return bad("keep takes no arguments")
		}
		return SplitOptions{Mode: SplitKeep}, nil
	case SplitRandom, SplitPerClass:
	default:
		return bad("want keep, random:TRAIN,VAL,TEST or per-class:TRAIN,VAL,TEST")
	}
	parts := strings.Split(args, ",")
	if !hasArgs || len(parts) != 3 {
		return bad("%s wants three comma-separated values (train,val,test)", mode)
	}
	o := SplitOptions{Mode: SplitMode(mode)}
	if o.Mode == SplitRandom {
		sum := 0.0
		for i, p := range parts {
			f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
			if err != nil || f < 0 || f > 1 || math.IsNaN(f) {
				return bad("value %d (%q) is not a fraction between 0 and 1", i+1, p)
			}
			o.Fractions[i] = f
			sum += f
		}
		if sum > 1+1e-9 {
			// 6 digits: the sum as the user would add the fractions, not
			// float64's 1.2000000000000002 for 0.8+0.3+0.1; more where 6
			// round it to 1 (0.3333334,0.3333333,0.3333334 said "add up
			// to 1, more than 1").
			text := strconv.FormatFloat(sum, 'g', 6, 64)
			for prec := 7; prec <= 17; prec++ {
				if v, _ := strconv.ParseFloat(text, 64); v > 1 {
					break
				}
				text = strconv.FormatFloat(sum, 'g', prec, 64)
			}
			return bad("fractions add up to %s, more than 1", text)
		}
		return o, nil
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v < 0 {
			return bad("value %d (%q) is not a count of nodes", i+1, p)
		}
		n[i] = v
	}
	o.PerClass, o.Val, o.Test = n[0], n[1], n[2]
	return o, nil
}

// hasLabel reports whether node v has a label: none of its label columns
// is -1. Without labels at all, every node counts as labelled.
func hasLabel(g *Graph, v uint32) bool {
	if g.Labels == nil || g.LabelDim == 0 {
		return true
	}
	for _, l := range g.Labels[int(v)*g.LabelDim : (int(v)+1)*g.LabelDim] {
		if l < 0 {
			return false
		}
	}
	return true
}

// Split sets g.Train, g.Val and g.Test as opts asks; each comes out sorted
// and without repeats. Nodes without a label never enter a split: with
// SplitKeep, input split entries that lack a label are taken out and
// their number is returned, so that the caller can report it.
func Split(g *Graph, opts SplitOptions) (removed int, err error) {
	rng := rand.New(rand.NewPCG(opts.Seed, splitStream))
	switch opts.Mode {
	case "", SplitKeep:
		for _, s := range []*[]uint32{&g.Train, &g.Val, &g.Test} {
			r, err := keepSplit(g, s)
			if err != nil {
				return 0, err
			}
			removed += r
		}
		return removed, disjointSplits(g)
	case SplitRandom:
		labelled := labelledNodes(g)
		rng.Shuffle(len(labelled), func(i, j int) { labelled[i], labelled[j] = labelled[j], labelled[i] })
		n := float64(len(labelled))
		nTrain := int(math.Round(opts.Fractions[0] * n))
		nVal := min(int(math.Round(opts.Fractions[1]*n)), len(labelled)-nTrain)
		nTest := min(int(math.Round(opts.Fractions[2]*n)), len(labelled)-nTrain-nVal)
		g.Train = sorted(labelled[:nTrain])
		g.Val = sorted(labelled[nTrain : nTrain+nVal])
		g.Test = sorted(labelled[nTrain+nVal : nTrain+nVal+nTest])
		return 0, nil
	case SplitPerClass:
		return 0, perClassSplit(g, opts, rng)
	}
	return 0, fmt.Errorf("partition: split mode %q: want keep, random or per-class", opts.Mode)
}

// keepSplit checks an input split, sorts it, drops repeats and nodes
// without labels.
func keepSplit(g *Graph, s *[]uint32) (int, error) {
	if *s == nil {
		return 0, nil
	}
	out := sorted(*s)
	k, removed := 0, 0
	for i, v := range out {
		if int(v) >= g.NumNodes {
			return 0, fmt.Errorf("partition: graph %q: split names node index %d beyond %d nodes", g.Name, v, g.NumNodes)
		}
		if i > 0 && v == out[i-1] {
			continue
		}
		if !hasLabel(g, v) {
			removed++
			continue
		}
		out[k] = v
		k++
	}
	*s = out[:k]
	return removed, nil
}

// disjointSplits refuses input splits (sorted) that share a node: a test
// node also in training leaks what the model is scored on.
func disjointSplits(g *Graph) error {
	named := []struct {
		name  string
		nodes []uint32
	}{{"train", g.Train}, {"val", g.Val}, {"test", g.Test}}
	for i, a := range named {
		for _, b := range named[i+1:] {
			if v, ok := firstCommon(a.nodes, b.nodes); ok {
				return fmt.Errorf("partition: graph %q: node %s is in both the %s and the %s split of the input: %w",
					g.Name, nodeName(g, v), a.name, b.name, ErrFormat)
			}
		}
	}
	return nil
}

// firstCommon is the smallest value of both sorted lists.
func firstCommon(a, b []uint32) (uint32, bool) {
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			return a[i], true
		}
	}
	return 0, false
}

// perClassSplit draws the Planetoid split: PerClass training nodes of
// each class (all of a smaller class), then Val and Test nodes from the
// labelled rest.
func perClassSplit(g *Graph, opts SplitOptions, rng *rand.Rand) error {
	if g.Labels == nil || g.LabelDim != 1 {
		return fmt.Errorf("partition: graph %q: per-class split needs one class label per node (label dim %d)", g.Name, g.LabelDim)
	}
	labelled := labelledNodes(g)
	rng.Shuffle(len(labelled), func(i, j int) { labelled[i], labelled[j] = labelled[j], labelled[i] })
	taken := make(map[int32]int)
	var train, rest []uint32
	for _, v := range labelled {
		c := g.Labels[v]
		if taken[c] < opts.PerClass {
			taken[c]++
			train = append(train, v)
			continue
		}
		rest = append(rest, v)
	}
	if opts.Val+opts.Test > len(rest) {
		return fmt.Errorf("partition: graph %q: per-class split wants %d val + %d test nodes, but only %d labelled nodes remain after %d training nodes",
			g.Name, opts.Val, opts.Test, len(rest), len(train))
	}
	g.Train = sorted(train)
	g.Val = sorted(rest[:opts.Val])
	g.Test = sorted(rest[opts.Val : opts.Val+opts.Test])
	return nil
}

// labelledNodes lists the labelled nodes in index order.
func labelledNodes(g *Graph) []uint32 {
	out := make([]uint32, 0, g.NumNodes)
	for v := 0; v < g.NumNodes; v++ {
		if hasLabel(g, uint32(v)) {
			out = append(out, uint32(v))
		}
	}
	return out
}

// sorted is a sorted copy of s.
func sorted(s []uint32) []uint32 {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
