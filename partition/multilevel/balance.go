package multilevel

import "slices"

// fitsTo: part p can take v without passing maxw in any constraint.
func (s *mlKway) fitsTo(p, v uint32) bool {
	for c := 0; c < s.nc; c++ {
		if w := s.g.vwgt(int(v), c); w > 0 && s.pw[int(p)*s.nc+c]+w > s.maxw[c] {
			return false
		}
	}
	return true
}

// fitsFrom: part p can give v away without falling below minw.
func (s *mlKway) fitsFrom(p, v uint32) bool {
	for c := 0; c < s.nc; c++ {
		if w := s.g.vwgt(int(v), c); w > 0 && s.pw[int(p)*s.nc+c]-w < s.minw[c] {
			return false
		}
	}
	return true
}

// load is part p's heaviest constraint relative to maxw.
func (s *mlKway) load(p uint32) float64 {
	return s.loadWith(p, 0, 0)
}

// loadWith is p's load after adding sign × v's weights.
func (s *mlKway) loadWith(p, v uint32, sign int64) float64 {
	var l float64
	for c := 0; c < s.nc; c++ {
		w := s.pw[int(p)*s.nc+c]
		if sign != 0 {
			w += sign * s.g.vwgt(int(v), c)
		}
		l = max(l, float64(w)/float64(max(s.maxw[c], 1)))
	}
	return l
}

// improves: moving v from a to b lowers the larger of the two loads.
func (s *mlKway) improves(a, b, v uint32) bool {
	before := max(s.loadWith(a, v, 0), s.loadWith(b, v, 0))
	after := max(s.loadWith(a, v, -1), s.loadWith(b, v, 1))
	return after < before
}

// overweight: part p passes maxw in some constraint in which v (when
// given, v >= 0) has weight.
func (s *mlKway) overweight(p uint32, v int) bool {
	for c := 0; c < s.nc; c++ {
		if s.pw[int(p)*s.nc+c] > s.maxw[c] && (v < 0 || s.g.vwgt(v, c) > 0) {
			return true
		}
	}
	return false
}

// underweight: part p is below minw in some constraint.
func (s *mlKway) underweight(p uint32) bool {
	for c := 0; c < s.nc; c++ {
		if s.pw[int(p)*s.nc+c] < s.minw[c] {
			return true
		}
	}
	return false
}

// balanced: no part passes maxw in any constraint.
func (s *mlKway) balanced() bool {
	for p := 0; p < s.k; p++ {
		for c := 0; c < s.nc; c++ {
			if s.pw[p*s.nc+c] > s.maxw[c] {
				return false
			}
		}
	}
	return true
}

// drain is the last resort when balancing passes leave a part
// overweight (no boundary vertex could go): it moves vertices out of
// overweight parts, boundary vertices first and those that lose the least
// cut first, each to the part that takes it with the best gain (or, when
// none has room, to the lightest part if that lowers the pair's load).
func (s *mlKway) drain() {
	n := s.g.NumVertices()
	var cands []uint32
	for round := 0; round < 2 && !s.balanced(); round++ {
		cands = cands[:0]
		for v := 0; v < n; v++ {
			if (round == 1 || s.ed[v] > 0) && s.overweight(s.where[v], v) {
				cands = append(cands, uint32(v))
			}
		}
		s.r.shuffle(cands)
		slices.SortStableFunc(cands, func(a, b uint32) int {
			ga, gb := s.ed[a]-s.id[a], s.ed[b]-s.id[b]
			switch {
			case ga > gb:
				return -1
			case ga < gb:
				return 1
			}
			return 0
		})
		for _, v := range cands {
			a := s.where[v]
			if !s.overweight(a, int(v)) {
				continue
			}
			s.connect(v)
			best, gain := -1, int64(0)
			for p := 0; p < s.k; p++ {
				if uint32(p) == a || !s.fitsTo(uint32(p), v) {
					continue
				}
				g := s.conn[p] - s.id[v]
				if best < 0 || g > gain || (g == gain && s.load(uint32(p)) < s.load(uint32(best))) {
					best, gain = p, g
				}
			}
			s.release()
			if best < 0 {
				// No part has room: the lightest takes v if that helps.
				for p := 0; p < s.k; p++ {
					if uint32(p) != a && (best < 0 || s.load(uint32(p)) < s.load(uint32(best))) {
						best = p
					}
				}
				if best < 0 || !s.improves(a, uint32(best), v) {
					continue
				}
			}
			s.move(v, uint32(best))
		}
	}
}
