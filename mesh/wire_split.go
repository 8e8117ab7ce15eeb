package mesh

import "encoding/binary"

// Split and label messages: a node holds the train/val/test masks and the
// labels of its own part only, so a loader whose seeds span the cluster
// asks each peer for its split once (SplitRequest) and, per batch, for the
// labels of the seeds that peer owns (LabelRequest).

// MaxSplitName bounds SplitRequest.Split: split names are short words
// ("train", "val", "test").
const MaxSplitName = 64

// SplitRequest asks a peer for the global ids of its nodes in a split.
//
//	split str (at most MaxSplitName bytes)
type SplitRequest struct {
	Split string
}

// AppendSplitRequest appends r's payload to b.
func AppendSplitRequest(b []byte, r *SplitRequest) []byte { return appendStr(b, r.Split) }

// DecodeSplitRequest decodes a SplitRequest payload into r.
func DecodeSplitRequest(p []byte, r *SplitRequest) error {
	d := decoder{msg: "SplitRequest", b: p}
	r.Split = d.str("split")
	if d.err == nil && len(r.Split) > MaxSplitName {
		d.fail("split", "%d bytes, limit %d", len(r.Split), MaxSplitName)
	}
	return d.end()
}

// SplitResponse answers a SplitRequest: the split's ids owned by the
// peer, in ascending order.
//
//	ids []u64   (strictly ascending)
type SplitResponse struct {
	IDs []uint64
}

// AppendSplitResponse appends r's payload to b.
func AppendSplitResponse(b []byte, r *SplitResponse) []byte { return appendU64s(b, r.IDs) }

// DecodeSplitResponse decodes a SplitResponse payload into r, reusing
// r.IDs' capacity. Ids out of order are malformed: the receiver merges
// the lists of every peer and relies on it.
func DecodeSplitResponse(p []byte, r *SplitResponse) error {
	d := decoder{msg: "SplitResponse", b: p}
	r.IDs = d.u64s("ids", r.IDs)
	if d.err == nil {
		for i := 1; i < len(r.IDs); i++ {
			if r.IDs[i] <= r.IDs[i-1] {
				d.fail("ids", "not ascending at %d (%d after %d)", i, r.IDs[i], r.IDs[i-1])
				break
			}
		}
	}
	return d.end()
}

// LabelRequest asks for the labels of ids the peer owns.
//
//	ids []u64
type LabelRequest struct {
	IDs []uint64
}

// AppendLabelRequest appends r's payload to b.
func AppendLabelRequest(b []byte, r *LabelRequest) []byte { return appendU64s(b, r.IDs) }

// DecodeLabelRequest decodes a LabelRequest payload into r, reusing
// r.IDs' capacity.
func DecodeLabelRequest(p []byte, r *LabelRequest) error {
	d := decoder{msg: "LabelRequest", b: p}
	r.IDs = d.u64s("ids", r.IDs)
	return d.end()
}

// LabelResponse carries Dim labels per requested id, in request order
// (-1 = missing).
//
//	dim u32 | labels []i32   (len(labels) = count(ids) × dim)
type LabelResponse struct {
	Dim    uint32
	Labels []int32
}

// Count is the number of ids the response answers.
func (r *LabelResponse) Count() int {
	if r.Dim == 0 {
		return 0
	}
	return len(r.Labels) / int(r.Dim)
}

// AppendLabelResponse appends r's payload to b.
func AppendLabelResponse(b []byte, r *LabelResponse) []byte {
	b = binary.LittleEndian.AppendUint32(b, r.Dim)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.Labels)))
	for _, v := range r.Labels {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return b
}

// DecodeLabelResponse decodes a LabelResponse payload into r, reusing
// r.Labels' capacity. A dim of 0 or a label count it does not divide is
// malformed.
func DecodeLabelResponse(p []byte, r *LabelResponse) error {
	d := decoder{msg: "LabelResponse", b: p}
	r.Dim = d.u32("dim")
	if d.err == nil && r.Dim == 0 {
		d.fail("dim", "0")
	}
	n := d.count("labels", 4)
	raw := d.take("labels", uint64(n)*4)
	if d.err == nil && uint32(n)%r.Dim != 0 {
		d.fail("labels", "%d labels are not a multiple of dim %d", n, r.Dim)
	}
	r.Labels = r.Labels[:0]
	if d.err == nil {
		if cap(r.Labels) < n {
			r.Labels = make([]int32, 0, n)
		}
		for i := range n {
			r.Labels = append(r.Labels, int32(binary.LittleEndian.Uint32(raw[4*i:])))
		}
	}
	return d.end()
}
