package shm

import (
	"errors"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  string // substring of the error; "" for success
	}{
		{"1048576", 1048576, ""},
		{"0", 0, ""},
		{"512MB", 512_000_000, ""},
		{"1GB", 1_000_000_000, ""},
		{"1gb", 1_000_000_000, ""},
		{"64KiB", 65536, ""},
		{"64 kib", 65536, ""},
		{" 2 GiB ", 2 << 30, ""},
		{"1.5GiB", 3 << 29, ""},
		{"0.5KB", 500, ""},
		{"100B", 100, ""},
		{"1TiB", 1 << 40, ""},
		{"8388607TiB", 8388607 << 40, ""},
		{"", 0, "want a number"},
		{"GB", 0, "want a number"},
		{"-1GB", 0, "want a number"},
		{"1.2.3MB", 0, "want a number"},
		{"1G", 0, `unit "G" is ambiguous, write GB (powers of 1000) or GiB`},
		{"1k", 0, `unit "k" is ambiguous, write KB`},
		{"1PB", 0, `unknown unit "PB"`},
		{"1.0001KB", 0, "1000.100 bytes is not a whole number"},
		{"8388608TiB", 0, "more than 9223372036854775807 bytes"},
		{"99999999999999999999", 0, "more than"},
	} {
		got, err := ParseSize(tc.in)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		case tc.err != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "shm: size")):
			t.Errorf("ParseSize(%q) = %d, %v; want an ErrInvalid saying %q", tc.in, got, err, tc.err)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0"}, {1, "1"}, {2000, "2KB"}, {1000, "1KB"}, {1024, "1KiB"}, {1 << 30, "1GiB"},
		{1e9, "1GB"}, {1000001, "1000001"}, {3 << 29, "1536MiB"},
	} {
		if got := FormatSize(tc.n); got != tc.want {
			t.Errorf("FormatSize(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// TestApproxSize: sizes for a reader (free space), in binary units.
func TestApproxSize(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0"}, {1023, "1023"}, {1024, "1KiB"}, {1536, "1.5KiB"}, {256 << 10, "256KiB"},
		{3 << 29, "1.5GiB"}, {1e9, "953.7MiB"}, {64<<20 - 4096, "64.0MiB"},
	} {
		if got := ApproxSize(tc.n); got != tc.want {
			t.Errorf("ApproxSize(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// FuzzParseSize: ParseSize never panics, and FormatSize of any size it
// accepts parses back to the same size.
func FuzzParseSize(f *testing.F) {
	for _, n := range []int64{0, 1, 4096, 1e9, 1 << 30, 3 << 29, 1000001} {
		f.Add(FormatSize(n))
	}
	f.Add("1.5GiB")
	f.Add("64 kib")
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("ParseSize(%q) = %d < 0", s, n)
		}
		if back, err := ParseSize(FormatSize(n)); err != nil || back != n {
			t.Fatalf("ParseSize(FormatSize(%d) = %q) = %d, %v", n, FormatSize(n), back, err)
		}
	})
}
