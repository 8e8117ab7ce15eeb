package train

// Dropout masks are a pure function of (seed, rank, epoch, batch, layer,
// element): element i keeps its value when lane i mod 4 of
// mix64(stream + ⌊i/4⌋·φ), read as a 16-bit number, is at least
// round(p·2^16). A mask therefore does not depend on the order in which
// elements are visited, and a gradient check can replay it.

const golden = 0x9E3779B97F4A7C15 // 2^64 / φ

// mix64 is the splitmix64 finaliser.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// dropStream is the mask stream of one layer of one training batch.
func dropStream(seed uint64, rank, epoch, batch, layer int) uint64 {
	h := mix64(seed + golden)
	h = mix64(h ^ mix64(uint64(rank)+golden))
	h = mix64(h ^ mix64(uint64(epoch)+golden))
	h = mix64(h ^ mix64(uint64(batch)+golden))
	return mix64(h ^ mix64(uint64(layer)+golden))
}

// drop is one dropout draw: probability p, quantised to 1/65536.
type drop struct {
	thresh uint64  // a lane below it drops the element
	scale  float64 // 1 / keep probability
}

func newDrop(p float64) drop {
	t := uint64(p*65536 + 0.5)
	if t == 0 {
		return drop{}
	}
	return drop{thresh: t, scale: 65536 / float64(65536-t)}
}

func (d drop) on() bool { return d.thresh != 0 }

// apply zeroes the dropped elements of x (x is element base … of the
// stream's matrix) and scales the kept ones; it returns the count of
// non-zero values left.
func dropApply[T float](d drop, stream uint64, x []T) int {
	nnz := 0
	if !d.on() {
		for _, v := range x {
			if v != 0 {
				nnz++
			}
		}
		return nnz
	}
	s := T(d.scale)
	var h uint64
	for i := range x {
		if i&3 == 0 {
			h = mix64(stream + uint64(i>>2)*golden)
		}
		if (h>>(16*(i&3)))&0xffff < d.thresh {
			x[i] = 0
			continue
		}
		x[i] *= s
		if x[i] != 0 {
			nnz++
		}
	}
	return nnz
}

// reluDrop applies ReLU then dropout to x in place and returns the count
// of non-zero values left.
func reluDrop[T float](d drop, stream uint64, x []T) int {
	for i, v := range x {
		if v < 0 {
			x[i] = 0
		}
	}
	return dropApply(d, stream, x)
}

// reluDropBack turns the gradient g with respect to y = drop(relu(o)) into
// the gradient with respect to o, in place: g·scale where y > 0 and 0
// elsewhere (a dropped element and a negative o both pass nothing).
func reluDropBack[T float](d drop, y, g []T) {
	s := T(1)
	if d.on() {
		s = T(d.scale)
	}
	g = g[:len(y)]
	for i, v := range y {
		if v > 0 {
			g[i] *= s
		} else {
			g[i] = 0
		}
	}
}
