package sample

// posMap maps global ids to their position in a batch's n_id: an
// open-addressing table with linear probing and generation stamps, so that
// emptying it for the next batch is one increment instead of a clear, and
// a steady-state batch allocates nothing. Not safe for concurrent use.
type posMap struct {
	slots []slot
	gen   uint32
	shift uint // 64 − log2(len(slots))
	n     int  // live entries of generation gen
}

// slot is 16 bytes, so a probe touches one cache line.
type slot struct {
	key   uint64
	pos   int32
	stamp uint32 // the slot is live iff stamp == gen
}

const minSlots = 1 << 10

// reset empties the map and makes room for about expect entries.
func (m *posMap) reset(expect int) {
	m.gen++
	if m.gen == 0 {
		// Stamps wrapped after 2^32 batches: clear them once.
		clear(m.slots)
		m.gen = 1
	}
	m.n = 0
	if want := slotsFor(expect); want > len(m.slots) {
		m.alloc(want)
	}
}

// slotsFor is the power of two keeping expect entries at most half full.
func slotsFor(expect int) int {
	n := minSlots
	for n < 2*expect {
		n *= 2
	}
	return n
}

func (m *posMap) alloc(n int) {
	m.slots = make([]slot, n)
	m.shift = 64
	for k := n; k > 1; k >>= 1 {
		m.shift--
	}
	m.gen = 1
}

// home is the first slot probed for key (Fibonacci hashing: the high bits
// of key·φ, which scatter sequential ids).
func (m *posMap) home(key uint64) uint64 { return (key * golden) >> m.shift }

// insert maps key to pos unless it is present. It returns the position the
// key has after the call and whether it was inserted.
func (m *posMap) insert(key uint64, pos int32) (int32, bool) {
	if 2*(m.n+1) > len(m.slots) {
		m.grow()
	}
	mask := uint64(len(m.slots) - 1)
	for i := m.home(key); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.stamp != m.gen {
			*s = slot{key: key, pos: pos, stamp: m.gen}
			m.n++
			return pos, true
		}
		if s.key == key {
			return s.pos, false
		}
	}
}

// peek loads key's home slot, so that an insert soon after finds it in
// cache; the caller keeps the result alive.
func (m *posMap) peek(key uint64) uint32 {
	if len(m.slots) == 0 {
		return 0
	}
	return m.slots[m.home(key)].stamp
}

// lookup is key's position, or -1.
func (m *posMap) lookup(key uint64) int32 {
	if len(m.slots) == 0 {
		return -1
	}
	mask := uint64(len(m.slots) - 1)
	for i := m.home(key); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.stamp != m.gen {
			return -1
		}
		if s.key == key {
			return s.pos
		}
	}
}

// grow doubles the table and re-inserts the live entries.
func (m *posMap) grow() {
	old, gen := m.slots, m.gen
	n := 2 * len(old)
	if n < minSlots {
		n = minSlots
	}
	m.alloc(n)
	mask := uint64(n - 1)
	for _, s := range old {
		if s.stamp != gen {
			continue
		}
		i := m.home(s.key)
		for m.slots[i].stamp == m.gen {
			i = (i + 1) & mask
		}
		m.slots[i] = slot{key: s.key, pos: s.pos, stamp: m.gen}
	}
}
