package mesh

import (
	"fmt"
	"sort"
)

// Requests larger than one message. A request, and its answer, must fit
// the MaxMessage of both ends; a caller with more ids than that splits
// them into several requests, one message each. Pulls and labels have
// answers of a known size per id, so PullIDsPerMessage and
// LabelIDsPerMessage say how many ids one request may carry. A sample
// answer depends on the peer's degrees, which only the peer knows: the
// peer refuses a request whose answer could pass its limit (ErrTooLarge,
// from the degrees, before it samples anything), and the caller asks
// again for each half (SampleRequest.Slice), as sampling a node does not
// depend on which other nodes share its request.

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
