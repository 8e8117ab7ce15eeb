package shm

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"
)

// heapRing builds a ring over a copy of b in 8-byte-aligned Go memory, as
// the fuzz targets need: no file, no mapping.
func heapRing(b []byte) (*Ring, error) {
	words := make([]uint64, (len(b)+7)/8)
	// Sound: words is live Go memory of len(b) or more bytes, 8-byte
	// aligned, and the Ring keeps a reference to it through mem.
	mem := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), len(b))
	copy(mem, b)
	return newRing("fuzz.ring", mem, nil)
}

func TestHeaderRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		w        int
		capacity int64
		data     int64
	}{
		{1, PageSize, PageSize},
		{15, 1 << 20, PageSize},
		{16, 1 << 20, 2 * PageSize}, // 256 + 16*256 = 4352 > 4096
		{MaxSubRings, PageSize, 257 * PageSize},
	} {
		h := layoutFor(tc.w, tc.capacity)
		h.CreatorPID, h.CreatedNs = 4242, 1_700_000_000_000_000_000
		if h.DataOffset != tc.data || h.FileSize != tc.data+int64(tc.w)*tc.capacity {
			t.Errorf("layoutFor(%d, %d): data %d size %d, want data %d", tc.w, tc.capacity, h.DataOffset, h.FileSize, tc.data)
		}
		b := make([]byte, HeaderSize)
		h.encode(b)
		got, err := decodeHeader(b, h.FileSize)
		if err != nil || got != h {
			t.Errorf("decode(encode(%+v)) = %+v, %v", h, got, err)
		}
	}
}

func TestDecodeHeaderRejects(t *testing.T) {
	good := layoutFor(2, 2*PageSize)
	for _, tc := range []struct {
		name string
		edit func(b []byte) []byte
		want []string
	}{
		{"short", func(b []byte) []byte { return b[:100] }, []string{"truncated at 100 bytes"}},
		{"empty", func(b []byte) []byte { return nil }, []string{"bad magic"}},
		{"zero rings", func(b []byte) []byte { b[offSubRings] = 0; return b }, []string{"0 sub-rings"}},
		{"capacity", func(b []byte) []byte { b[offCapacity] = 1; return b }, []string{"sub-ring capacity 8193"}},
		{"sizes", func(b []byte) []byte { b[offHeaderSize+1] = 0; b[offCtlSize+1] = 0; b[offRecHdrSize] = 0; return b },
			[]string{"header size 0", "control block size 0", "record header size 0"}},
		{"data offset", func(b []byte) []byte { b[offDataOffset+1] = 0x20; return b }, []string{"data offset 8192, want 4096"}},
	} {
		b := make([]byte, HeaderSize)
		good.encode(b)
		_, err := decodeHeader(tc.edit(b), good.FileSize)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", tc.name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", tc.name, err, w)
			}
		}
	}
}

func TestCheckRecord(t *testing.T) {
	const c = PageSize
	for _, tc := range []struct {
		word        uint64
		pos, avail  int64
		n, skip     int64
		errContains string
	}{
		{100, 0, 192, 100, 192, ""},
		{0, 64, 64, 0, 64, ""},
		{c - 64, 0, c, c - 64, c, ""},   // largest record
		{64, c - 128, 128, 64, 128, ""}, // exact fit at the end
		{WrapMarker, 192, c - 192, -1, c - 192, ""},
		{WrapMarker, 0, c, 0, 0, "wrap marker at the start"},
		{WrapMarker, 192, 64, 0, 0, "only 64 published"},
		{65, c - 128, 192, 0, 0, "runs past the end"},
		{1 << 62, 0, c, 0, 0, "runs past the end"},
		{100, 0, 128, 0, 0, "needs 192, only 128 published"},
	} {
		n, skip, err := checkRecord(tc.word, tc.pos, c, tc.avail)
		if tc.errContains != "" {
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.errContains) {
				t.Errorf("checkRecord(%d, %d, %d): %v, want ErrCorrupt saying %q", tc.word, tc.pos, tc.avail, err, tc.errContains)
			}
			continue
		}
		if err != nil || n != tc.n || skip != tc.skip {
			t.Errorf("checkRecord(%d, %d, %d) = %d, %d, %v; want %d, %d", tc.word, tc.pos, tc.avail, n, skip, err, tc.n, tc.skip)
		}
	}
}

// FuzzDecodeHeader: arbitrary header bytes never panic the decoder, and
// whatever it accepts encodes back to the same header.
func FuzzDecodeHeader(f *testing.F) {
	for _, w := range []int{1, 3, 64} {
		h := layoutFor(w, 16*PageSize)
		h.CreatorPID = 77
		b := make([]byte, HeaderSize)
		h.encode(b)
		f.Add(b, h.FileSize)
	}
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		h, err := decodeHeader(b, size)
		if err != nil {
			return
		}
		if h.FileSize != size || h.DataOffset+int64(h.SubRings)*h.Capacity != size {
			t.Fatalf("accepted %+v for a file of %d bytes", h, size)
		}
		out := make([]byte, HeaderSize)
		h.encode(out)
		if back, err := decodeHeader(out, size); err != nil || back != h {
			t.Fatalf("re-decode: %+v, %v; want %+v", back, err, h)
		}
	})
}

// seedRing is the image of a one-sub-ring, one-page ring holding two
// records, a wrap marker and a record at offset 0, with one record
// already released: what the producer writes.
func seedRing(t testing.TB) []byte {
	h := layoutFor(1, PageSize)
	b := make([]byte, h.FileSize)
	h.encode(b)
	r, err := heapRing(b)
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Producer(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, n := range []int{1000, 1000, 1000} {
		buf, _ := p.Reserve(ctx, n)
		gen(buf, 0, i)
		p.Commit(n)
		if i == 1 {
			atomic.StoreUint64(r.u64(0, ctlRead), 1088) // the consumer released record 0
		}
	}
	// 3264 + 1088 passes the end: a marker at 3264, the record at 0.
	buf, err := p.Reserve(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	gen(buf, 0, 3)
	p.Commit(1000)
	p.Close()
	return append([]byte(nil), r.mem...)
}

// FuzzRing: a consumer over arbitrary ring bytes validates the header,
// the counters and every length word; it never panics and never hands out
// a view outside the sub-ring's record area.
func FuzzRing(f *testing.F) {
	seed := seedRing(f)
	f.Add(seed)
	f.Add(seed[:len(seed)-1])
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := heapRing(b)
		if err != nil {
			return
		}
		c, err := r.Consumer()
		if err != nil {
			return
		}
		for w := range min(r.SubRings(), 4) {
			for range 64 {
				rec, ok, err := c.poll(w)
				if err != nil || !ok {
					break
				}
				if off := offsetIn(r, w, rec); len(rec) > 0 && (off < RecordHeaderSize || off+int64(len(rec)) > r.Capacity()) {
					t.Fatalf("sub-ring %d: view of %d bytes at offset %d of %d", w, len(rec), off, r.Capacity())
				}
				if err := c.Release(w); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

// TestSeedRing pins what FuzzRing's seed holds, so the seed exercises
// the paths it claims to.
func TestSeedRing(t *testing.T) {
	r, err := heapRing(seedRing(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Consumer()
	if err != nil {
		t.Fatal(err)
	}
	for i, off := range []int64{1088 + 64, 2176 + 64, 64} {
		rec, ok, err := c.poll(0)
		if !ok || err != nil {
			t.Fatalf("record %d: %v, %v", i+1, ok, err)
		}
		checkRec(t, rec, 0, i+1, 1000)
		if got := offsetIn(r, 0, rec); got != off {
			t.Errorf("record %d at %d, want %d", i+1, got, off)
		}
		c.Release(0)
	}
	if _, ok, err := c.poll(0); ok || err != nil {
		t.Fatalf("after the last record: %v, %v", ok, err)
	}
}

// TestLayoutOffsets pins the offsets that doc.go draws and that a
// foreign client (the Python reader) hard-codes.
func TestLayoutOffsets(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want int
	}{
		{"header size", HeaderSize, 256}, {"control block size", CtlSize, 256},
		{"record header", RecordHeaderSize, 64}, {"magic", offMagic, 0},
		{"sub-rings", offSubRings, 16}, {"capacity", offCapacity, 24},
		{"data offset", offDataOffset, 32}, {"file size", offFileSize, 40},
		{"creator pid", offCreatorPID, 48},
		{"write counter", ctlWrite, 0}, {"data word", ctlDataSeq, 8},
		{"space-waiter flag", ctlSpaceWaiter, 12}, {"producer state", ctlProdState, 16},
		{"producer pid", ctlProdPID, 20}, {"heartbeat", ctlHeartbeat, 24},
		{"read counter", ctlRead, 64}, {"space word", ctlSpaceSeq, 72},
		{"data-waiter flag", ctlDataWaiter, 76}, {"consumer state", ctlConsState, 80},
		{"consumer pid", ctlConsPID, 84},
	} {
		if tc.got != tc.want {
			t.Errorf("%s at %d, doc.go says %d", tc.name, tc.got, tc.want)
		}
	}
}

// goldenPath holds seedRing's image with the producer pid and heartbeat
// zeroed: a ring a foreign reader can be tested against (see
// testdata/README.md). GRAPHNODE_UPDATE_GOLDEN=1 rewrites it.
const goldenPath = "testdata/ring-v1.golden"

func TestGoldenRing(t *testing.T) {
	img := seedRing(t)
	binary.LittleEndian.PutUint32(img[ctl(0)+ctlProdPID:], 0)
	binary.LittleEndian.PutUint64(img[ctl(0)+ctlHeartbeat:], 0)
	binary.LittleEndian.PutUint64(img[ctl(0)+ctlProdPIDNS:], 0)
	if os.Getenv("GRAPHNODE_UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(goldenPath, img, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("%v (GRAPHNODE_UPDATE_GOLDEN=1 writes it)", err)
	}
	if !bytes.Equal(img, want) {
		for i := range min(len(img), len(want)) {
			if img[i] != want[i] {
				t.Fatalf("ring image differs from %s at byte %d (%d bytes vs %d): the format changed", goldenPath, i, len(img), len(want))
			}
		}
		t.Fatalf("ring image is %d bytes, %s %d", len(img), goldenPath, len(want))
	}
}
