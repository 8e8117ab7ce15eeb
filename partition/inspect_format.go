package partition

// The report of node inspect as text: the whole directory's figures, then a
// table of the parts, the expected read shares and every file's check.

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// totals computes the whole-directory figures.
func (r *Report) totals() {
	var maxN, maxE, maxT, sumN, sumT uint64
	for _, p := range r.Parts {
		r.Edges += p.Edges
		r.Cut += p.Cut
		sumN += p.Nodes
		sumT += p.Train
		maxN, maxE, maxT = max(maxN, p.Nodes), max(maxE, p.Edges), max(maxT, p.Train)
	}
	k := float64(len(r.Parts))
	r.NodeBalance = balance(maxN, sumN, k)
	r.EdgeBalance = balance(maxE, r.Edges, k)
	r.TrainBalance = balance(maxT, sumT, k)
}

// balance is max / mean, 0 when the sum is 0.
func balance(mx, sum uint64, k float64) float64 {
	if sum == 0 {
		return 0
	}
	return float64(mx) / (float64(sum) / k)
}

// percent is part / whole in percent, 0 when whole is 0.
func percent(part, whole uint64) float64 {
	if whole == 0 {
		return 0
	}
	return 100 * float64(part) / float64(whole)
}

// joinInts writes 15,10,5.
func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// Format writes the report as aligned text tables.
func (r *Report) Format(w io.Writer) error {
	m := r.Manifest
	feat := "none"
	if m.FeatDim > 0 {
		feat = fmt.Sprintf("%d × %s", m.FeatDim, m.FeatDtype)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %q, %d nodes, %d edges, %d parts (%s, seed %d), direction %s, features %s, %d classes, ids %s\n",
		r.Dir, m.Name, m.Nodes, m.Edges, m.Parts, m.Method, m.Seed, m.Direction, feat, m.Classes, m.IDKind)
	fmt.Fprintf(&b, "checksum %s\n\n", m.Checksum)

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	reads := r.ReadFanouts != nil
	head := "part\tnodes\tedges\tfeat bytes\ttrain\tval\ttest\tdeg min\tmean\tp50\tp99\tmax\tcut %\tcache\t"
	if reads {
		head += "reads local %\tcached %\tremote %\t"
	}
	fmt.Fprintln(tw, head)
	for _, p := range r.Parts {
		if p.Err != nil && p.Sections == nil {
			fmt.Fprintf(tw, "%d\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t\n", p.Part)
			continue
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.2f\t%d\t%d\t%d\t%.2f\t%d\t", p.Part, p.Nodes, p.Edges, p.FeatBytes,
			p.Train, p.Val, p.Test, p.DegMin, p.DegMean, p.DegP50, p.DegP99, p.DegMax, percent(p.Cut, p.Edges), p.Cache)
		if reads {
			fmt.Fprintf(tw, "%.2f\t%.2f\t%.2f\t", 100*p.Reads.Local, 100*p.Reads.Cached, 100*p.Reads.Remote)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	cut := m.CutName()
	// A part that could not be read counts as empty in the totals: a
	// balanced partitioning would show as unbalanced.
	var unread []int
	for _, p := range r.Parts {
		if p.Err != nil && p.Sections == nil {
			unread = append(unread, p.Part)
		}
	}
	if len(unread) > 0 {
		what := "part"
		if len(unread) > 1 {
			what = "parts"
		}
		fmt.Fprintf(&b, "\nedge cut and balance not computed: %s %s could not be read (below)\n", what, joinInts(unread))
	} else if r.OnePart {
		fmt.Fprintf(&b, "\npart %d alone (the other parts' files are not read): %s %.2f%% (%d of %d stored edges)\n",
			r.Parts[0].Part, cut, percent(r.Cut, r.Edges), r.Cut, r.Edges)
	} else {
		// No training nodes, nothing to balance: "-", as node partition
		// prints it (0.000 read as a balance far below 1).
		train := "-"
		if r.TrainBalance > 0 {
			train = fmt.Sprintf("%.3f", r.TrainBalance)
		}
		fmt.Fprintf(&b, "\n%s %.2f%% (%d of %d stored edges); balance max/mean: nodes %.3f, edges %.3f, train %s\n",
			cut, percent(r.Cut, r.Edges), r.Cut, r.Edges, r.NodeBalance, r.EdgeBalance, train)
	}
	if reads {
		fmt.Fprintf(&b, "expected feature reads per epoch (fanouts %s, batch %d, trainer p reading share p of split train): %.0f; local %.2f%%, cached %.2f%%, remote %.2f%%\n",
			joinInts(r.ReadFanouts), r.ReadBatch, r.Reads.Reads, 100*r.Reads.Local, 100*r.Reads.Cached, 100*r.Reads.Remote)
		for _, p := range r.Parts {
			if e := p.Recorded; e != nil {
				fmt.Fprintf(&b, "part %d: graph.toml records expected reads local %.2f%%, cached %.2f%%, remote %.2f%%: the estimate of the build that wrote it (this build's is in the table)\n",
					p.Part, 100*e.Local, 100*e.Cached, 100*e.Remote)
			}
		}
	}

	for _, p := range r.Parts {
		if len(p.Sections) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s\n", p.Path)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  section\ttype\toffset\tlength\tcrc32c")
		for _, s := range p.Sections {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%08x\n", s.Name, s.Type, s.Offset, s.Length, s.CRC)
		}
		tw.Flush()
	}
	for _, p := range r.Parts {
		if p.Err != nil && r.Files == nil {
			fmt.Fprintf(&b, "\n%s: FAILED: %v\n", p.Path, p.Err)
		}
	}
	if r.Files != nil {
		b.WriteString("\nverify\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for _, f := range r.Files {
			if f.Err != nil {
				fmt.Fprintf(tw, "  %s\tFAILED\t%v\n", f.Path, f.Err)
				continue
			}
			fmt.Fprintf(tw, "  %s\tOK\n", f.Path)
		}
		tw.Flush()
		if len(r.Unlisted) > 0 {
			names := strings.Join(r.Unlisted[:min(len(r.Unlisted), unlistedShown)], ", ")
			if more := len(r.Unlisted) - unlistedShown; more > 0 {
				names += fmt.Sprintf(" and %d more", more)
			}
			fmt.Fprintf(&b, "\nnot in graph.toml, not checked: %s\n", names)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
