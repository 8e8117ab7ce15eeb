package partition

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestLineError(t *testing.T) {
	err := error(&LineError{File: "a/b.csv", Line: 12, Msg: "want 2 fields, got 3"})
	rdEq(t, "text", err.Error(), "partition: a/b.csv:12: want 2 fields, got 3")
	if !errors.Is(err, ErrFormat) {
		t.Error("LineError does not wrap ErrFormat")
	}
}

func TestOpenInputGzipByMagic(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		gz   bool
	}{{"plain.gz", false}, {"packed.txt", true}} {
		path := rdWrite(t, dir, c.name, "l1\r\nl2\n"+strings.Repeat("x", 3<<20)+"\nlast", c.gz)
		var lines []string
		var nums []int64
		err := scanFile(context.Background(), path, nil, func(s *lineScanner, line []byte) error {
			if len(line) > 10 {
				line = line[:10]
			}
			lines = append(lines, string(line))
			nums = append(nums, s.line)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		rdEq(t, c.name+" lines", lines, []string{"l1", "l2", "xxxxxxxxxx", "last"})
		rdEq(t, c.name+" numbers", nums, []int64{1, 2, 3, 4})
	}
	bad := rdWrite(t, dir, "bad.gz", "", true)
	b := mustRead(t, bad)
	rdWrite(t, dir, "trunc.gz", string(append(b[:10:10], 1, 2, 3)), false)
	err := scanFile(context.Background(), dir+"/trunc.gz", nil, func(*lineScanner, []byte) error { return nil })
	if !errors.Is(err, ErrFormat) {
		t.Errorf("corrupt gzip: %v, want ErrFormat", err)
	}
}

// TestByteOrderMark: a UTF-8 BOM before the first line, plain or
// gzipped, is not part of the first id (left in, the edge list's node 1
// became the string id "\ufeff1", a fourth node, and LINQS's first paper
// lost its citations as dangling); text without one, down to a single
// byte, reads unchanged.
func TestByteOrderMark(t *testing.T) {
	dir := t.TempDir()
	for _, gz := range []bool{false, true} {
		for text, want := range map[string][]string{
			utf8BOM + "1 2\n2 3\n3 1\n": {"1 2", "2 3", "3 1"},
			"1 2\n2 3\n":                {"1 2", "2 3"},
			utf8BOM:                     nil,
			"7":                         {"7"},
			"\xef\xbb":                  {"\xef\xbb"},
		} {
			path := rdWrite(t, dir, "e.txt", text, gz)
			var lines []string
			if err := scanFile(context.Background(), path, nil, func(_ *lineScanner, line []byte) error {
				lines = append(lines, string(line))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			rdEq(t, strconv.Quote(text)+" gzip "+strconv.FormatBool(gz), lines, want)
		}
		path := rdWrite(t, dir, "bom.txt", utf8BOM+"1 2\n2 3\n3 1\n", gz)
		g, err := Read(context.Background(), path, ReadOptions{Format: FormatEdgeList})
		if err != nil {
			t.Fatal(err)
		}
		if g.NumNodes != 3 || g.IDs.Names != nil {
			t.Errorf("edge list with a BOM, gzip %v: %d nodes, names %q; want 3 integer ids", gz, g.NumNodes, g.IDs.Names)
		}
	}
	d := t.TempDir()
	rdWrite(t, d, "x.content", utf8BOM+"a\t1\t0\tA\nb\t0\t1\tB\n", false)
	rdWrite(t, d, "x.cites", "a\tb\nb\ta\n", false)
	g, err := Read(context.Background(), d, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Src) != 2 || g.Stats.Dangling != 0 || g.IDs.Names[0] != "a" {
		t.Errorf("LINQS with a BOM: %d edges, %d dangling, names %q; want 2, 0 and a first", len(g.Src), g.Stats.Dangling, g.IDs.Names)
	}
}

func TestParseUint(t *testing.T) {
	for _, c := range []struct {
		in string
		v  uint64
		ok bool
	}{
		{"0", 0, true}, {"007", 7, true}, {"18446744073709551615", math.MaxUint64, true},
		{"18446744073709551616", 0, false}, {"99999999999999999999", 0, false}, {"", 0, false},
		{"+1", 0, false}, {"-1", 0, false}, {"1a", 0, false}, {"000000000000000000001", 0, false},
	} {
		v, ok := parseUint([]byte(c.in))
		if v != c.v || ok != c.ok {
			t.Errorf("parseUint(%q) = %d, %v; want %d, %v", c.in, v, ok, c.v, c.ok)
		}
	}
	for _, c := range []struct {
		in string
		v  int64
		ok bool
	}{{"-5", -5, true}, {"+5", 5, true}, {"9223372036854775808", 0, false}, {"-", 0, false}} {
		v, ok := parseInt([]byte(c.in))
		if v != c.v || ok != c.ok {
			t.Errorf("parseInt(%q) = %d, %v; want %d, %v", c.in, v, ok, c.v, c.ok)
		}
	}
}

// checkFloat compares parseFloat32 with strconv.ParseFloat(s, 32).
func checkFloat(t testing.TB, s string) {
	want, err := strconv.ParseFloat(s, 32)
	got, ok := parseFloat32([]byte(s))
	if ok != (err == nil) {
		t.Fatalf("parseFloat32(%q) ok = %v, strconv err = %v", s, ok, err)
	}
	if ok && math.Float32bits(got) != math.Float32bits(float32(want)) {
		t.Fatalf("parseFloat32(%q) = %v (%#x), strconv %v (%#x)", s, got, math.Float32bits(got), float32(want), math.Float32bits(float32(want)))
	}
}

func TestParseFloat32(t *testing.T) {
	for _, s := range []string{"0", "-0", "-0.0", "1", "0.5", ".5", "5.", "1e3", "1E-3", "+2.5e+2", "-0.0579110048711300",
		"3.4028235e38", "3.4028236e38", "1e39", "1e-46", "1.1754942e-38", "1.4e-45", "nan", "NaN", "inf", "-Inf",
		"", "-", ".", "e5", "1e", "1e+", "0x1p-2", "1_0", "12345678901234567890123", "0.000000000000000000000001",
		"16777217", "16777219", "1.00000005960464477539062500", "1.000000059604644775390625001", "1,5", " 1"} {
		checkFloat(t, s)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 200000 {
		f := math.Float32frombits(rng.Uint32())
		if f != f || math.IsInf(float64(f), 0) {
			continue
		}
		checkFloat(t, strconv.FormatFloat(float64(f), 'g', -1, 32))
		checkFloat(t, strconv.FormatFloat(float64(f), 'e', rng.IntN(20), 64))
		checkFloat(t, strconv.FormatFloat(float64(f)*rng.Float64(), 'f', rng.IntN(18), 64))
		// float32 rounding midpoints and their float64 neighbours: the
		// double-rounding cases the fast path must hand to strconv.
		next := math.Nextafter32(f, float32(math.Inf(1)))
		mid := (float64(f) + float64(next)) / 2
		for _, m := range []float64{mid, math.Nextafter(mid, 0), math.Nextafter(mid, math.Inf(1))} {
			checkFloat(t, strconv.FormatFloat(m, 'g', -1, 64))
			checkFloat(t, strconv.FormatFloat(m, 'e', 16, 64))
		}
	}
	for range 100000 { // random decimal strings
		var b strings.Builder
		if rng.IntN(2) == 0 {
			b.WriteByte('-')
		}
		for range 1 + rng.IntN(12) {
			b.WriteByte(byte('0' + rng.IntN(10)))
		}
		b.WriteByte('.')
		for range rng.IntN(14) {
			b.WriteByte(byte('0' + rng.IntN(10)))
		}
		if rng.IntN(3) == 0 {
			b.WriteString("e" + strconv.Itoa(rng.IntN(80)-40))
		}
		checkFloat(t, b.String())
	}
}

func FuzzParseFloat32(f *testing.F) {
	for _, v := range []float32{0, 1, -0.5, 3.4028235e38, 1.4e-45, 0.1} {
		f.Add(strconv.FormatFloat(float64(v), 'g', -1, 32))
		f.Add(strconv.FormatFloat(float64(v), 'e', 12, 64))
	}
	f.Add("-0.0579110048711300")
	f.Fuzz(func(t *testing.T, s string) { checkFloat(t, s) })
}

// BenchmarkParseFloat32 compares the fast path with strconv (the
// baseline) on OGB-style decimals.
func BenchmarkParseFloat32(b *testing.B) {
	rng := rand.New(rand.NewPCG(13, 14))
	vals := make([][]byte, 1024)
	size := 0
	for i := range vals {
		vals[i] = []byte(strconv.FormatFloat(rng.NormFloat64()*0.1, 'f', 16, 64))
		size += len(vals[i])
	}
	for _, c := range []struct {
		name  string
		parse func([]byte) (float32, bool)
	}{{"fast", parseFloat32}, {"strconv", parseFloat32Slow}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				for _, v := range vals {
					c.parse(v)
				}
			}
			b.ReportMetric(float64(len(vals))*float64(b.N)/b.Elapsed().Seconds(), "floats/s")
		})
	}
}

// TestOpenInputOtherCompression: a file compressed with bzip2, xz or
// zstd is refused by its magic, saying what to do; read as text, a
// bzip2 edge list gave a graph of garbage string ids. Text that only
// starts like bzip2's magic is still text.
func TestOpenInputOtherCompression(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ kind, head string }{
		{"bzip2", "BZh91AY&SY\x8a\x1c\x02\x00"},
		{"bzip2", "BZh9\x17\x72\x45\x38\x50\x90\x00\x00\x00\x00"}, // an empty stream
		{"xz", "\xfd7zXZ\x00\x00\x04\xe6\xd6\xb4\x46"},
		{"zstd", "\x28\xb5\x2f\xfd\x24\x04\x21\x00"},
	} {
		path := rdWrite(t, dir, "e.txt", c.head, false)
		_, err := Read(context.Background(), path, ReadOptions{})
		want := "partition: " + path + ": compressed with " + c.kind + ": decompress it first (gzip is read directly)"
		if !errors.Is(err, ErrFormat) || !strings.HasPrefix(fmt.Sprint(err), want) {
			t.Errorf("%s: err = %v, want %q", c.kind, err, want)
		}
	}
	path := rdWrite(t, dir, "e.txt", "BZh5 a\nb BZh9\n", false)
	g, err := Read(context.Background(), path, ReadOptions{})
	if err != nil || !slices.Equal(g.IDs.Names, []string{"BZh5", "a", "b", "BZh9"}) {
		t.Errorf("text starting BZh: %v, names %q", err, g.IDs.Names)
	}
}
