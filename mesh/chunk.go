package mesh

import (
	"fmt"
	"sort"
)

// Requests larger than one message. A request, and its answer, must fit
// the MaxMessage of both ends; a caller with more ids than that splits
// them into several requests, one message each, and puts the answers
// together. Pulls and labels have answers of a known size per id, so
// PullIDsPerMessage and LabelIDsPerMessage say how many ids one request
// may carry. A sample answer depends on the peer's degrees: SampleCuts
// splits a request by its own size and by the fanout's bound on the
// answer; an answer that the fanout does not bound (-1) the peer refuses
// when it could pass the limit (ErrTooLarge, from the degrees, before it
// samples anything), and the caller asks again for each half
// (SampleRequest.Slice). Sampling a node does not depend on the other
// nodes of its request, so the answers put together are the answer of
// the whole.

// Fixed bytes of the payloads, besides their per-id parts.
const (
	idsHead   = 4         // a counted array's count
	pullHead  = 4 + 8     // PullResponse: dtype, reserved, row size, count
	labelHead = 4 + 4     // LabelResponse: dim, count
	maxCount  = 1<<32 - 1 // an array's count is a u32
)

// PullIDsPerMessage is the most ids one PullRequest may carry so that
// both it and its answer, rows of rowSize bytes, fit payloads of limit
// bytes (a Client's MaxMessage). A row that does not fit with the
// answer's head is ErrTooLarge, naming both sizes.
func PullIDsPerMessage(limit, rowSize int) (int, error) {
	if rowSize <= 0 {
		return 0, fmt.Errorf("mesh: pull: rows of %d bytes: %w", rowSize, ErrMalformed)
	}
	if limit-pullHead < rowSize || limit-idsHead < 8 {
		return 0, fmt.Errorf("mesh: pull: a row of %d bytes does not fit the message limit of %d bytes (%d with the answer's head): %w",
			rowSize, limit, pullHead+rowSize, ErrTooLarge)
	}
	return min((limit-pullHead)/rowSize, (limit-idsHead)/8, maxCount), nil
}

// LabelIDsPerMessage is the most ids one LabelRequest may carry so that
// both it and its answer, dim labels per id, fit payloads of limit
// bytes. ErrTooLarge when not even one id fits.
func LabelIDsPerMessage(limit, dim int) (int, error) {
	if dim <= 0 {
		return 0, fmt.Errorf("mesh: labels: %d per node: %w", dim, ErrMalformed)
	}
	if (limit-labelHead)/4 < dim || limit-idsHead < 8 {
		return 0, fmt.Errorf("mesh: labels: %d labels of one node (%d bytes) do not fit the message limit of %d bytes: %w",
			dim, labelHead+4*dim, limit, ErrTooLarge)
	}
	return min((limit-labelHead)/4/dim, (limit-idsHead)/8, maxCount/dim), nil
}

// sampleHead is a SampleRequest's bytes besides its arrays' elements
// (key, hop, flags, fanout, the ids' count), excludeHead the counts of
// its three exclusion arrays, and answerHead a SampleResponse's two
// counts.
const (
	sampleHead  = KeySize + 2 + 2 + 4 + idsHead
	excludeHead = 3 * idsHead
	answerHead  = 2 * idsHead
)

// SampleCuts returns the bounds 0 = c0 < c1 < … < ck = len(r.IDs) of the
// slices of r (Slice(c[i], c[i+1])) whose requests fit payloads of limit
// bytes, and whose answers do too whatever the peer's degrees when
// r.Fanout bounds them (not -1): each slice holds as many ids as fit
// in order, at least one. It returns nil, and allocates nothing, when r
// fits whole: the usual case, one request. An answer that the fanout
// does not bound (-1, or one node whose fanout alone passes the limit)
// may still pass it: the peer refuses it (ErrTooLarge) before it
// samples, and the caller asks again in halves.
func SampleCuts(r *SampleRequest, limit int) []int {
	w, f := int64(8), int64(r.Fanout)
	if r.Narrow {
		w = 4
	}
	n, lim := int64(len(r.IDs)), int64(limit)
	req, ans := int64(sampleHead)+w*n, int64(answerHead)+4*n
	exclude := len(r.ExcludeAt) > 0
	if exclude {
		req += excludeHead + 8*int64(len(r.ExcludeAt)) + w*int64(len(r.ExcludeIDs))
	}
	if f >= 0 {
		ans += w * f * n
	}
	if req <= lim && ans <= lim {
		return nil
	}
	perAns := 4 + w*max(f, 0)
	cuts := []int{0}
	req, ans = sampleHead, answerHead
	j, excluding := 0, false // the next exclusion; whether the slice has one
	for i := range r.IDs {
		cost, ex := w, j < len(r.ExcludeAt) && int(r.ExcludeAt[j]) == i
		if ex {
			cost += 8 + w*int64(r.ExcludeCounts[j])
			j++
		}
		if i > cuts[len(cuts)-1] && (req+cost+head(ex && !excluding) > lim || ans+perAns > lim) {
			cuts = append(cuts, i)
			req, ans, excluding = sampleHead, answerHead, false
		}
		req += cost + head(ex && !excluding)
		ans += perAns
		excluding = excluding || ex
	}
	return append(cuts, len(r.IDs))
}

// head is the exclusion arrays' counts when a slice gets its first
// exclusion.
func head(first bool) int64 {
	if first {
		return excludeHead
	}
	return 0
}

// Slice is the request for IDs[lo:hi] alone: the same key, hop, fanout
// and flags, and the exclusions of those nodes, renumbered from lo. Its
// IDs, ExcludeCounts and ExcludeIDs alias r's; ExcludeAt is new when r
// has exclusions. Each node is sampled as it would be in r.
func (r *SampleRequest) Slice(lo, hi int) SampleRequest {
	s := *r
	s.IDs = r.IDs[lo:hi:hi]
	if len(r.ExcludeAt) == 0 {
		return s
	}
	j0 := sort.Search(len(r.ExcludeAt), func(j int) bool { return int64(r.ExcludeAt[j]) >= int64(lo) })
	j1 := sort.Search(len(r.ExcludeAt), func(j int) bool { return int64(r.ExcludeAt[j]) >= int64(hi) })
	o0 := 0
	for _, c := range r.ExcludeCounts[:j0] {
		o0 += int(c)
	}
	o1 := o0
	for _, c := range r.ExcludeCounts[j0:j1] {
		o1 += int(c)
	}
	s.ExcludeAt, s.ExcludeCounts, s.ExcludeIDs = nil, nil, nil
	if j0 == j1 {
		return s
	}
	s.ExcludeAt = make([]uint32, j1-j0)
	for j, at := range r.ExcludeAt[j0:j1] {
		s.ExcludeAt[j] = at - uint32(lo)
	}
	s.ExcludeCounts, s.ExcludeIDs = r.ExcludeCounts[j0:j1:j1], r.ExcludeIDs[o0:o1:o1]
	return s
}
