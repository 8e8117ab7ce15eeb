package docs

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// block is one shell block of a markdown file: the script, run as
// written, and the output the file shows for it.
type block struct {
	heading string // the heading above it, "## 5. Start the two nodes"
	line    int    // the line of its opening fence, from 1
	script  string
	// sample is its lines that start with "# ", without the "# ": what
	// its commands print, in order, shortened with "…". To bash they
	// are comments.
	sample []string
}

func (b block) String() string { return fmt.Sprintf("line %d (%s)", b.line, b.heading) }

// shellBlocks is the blocks of md fenced as sh or bash, in order; other
// blocks (python, tables of flags) are not run.
func shellBlocks(md string) ([]block, error) {
	var (
		blocks  []block
		heading string
		cur     *block // the shell block being read
		fenced  bool   // inside any fenced block
		body    strings.Builder
	)
	for i, line := range strings.Split(md, "\n") {
		switch {
		case !fenced && strings.HasPrefix(line, "#"):
			heading = line
		case !fenced && strings.HasPrefix(line, "```"):
			fenced = true
			// The info string's first word is the language.
			if lang, _, _ := strings.Cut(strings.TrimSpace(line[3:]), " "); lang == "sh" || lang == "bash" {
				cur = &block{heading: heading, line: i + 1}
				body.Reset()
			}
		case fenced && strings.TrimSpace(line) == "```":
			fenced = false
			if cur != nil {
				cur.script = body.String()
				blocks = append(blocks, *cur)
				cur = nil
			}
		case cur != nil:
			body.WriteString(line + "\n")
			if s, ok := strings.CutPrefix(line, "# "); ok {
				cur.sample = append(cur.sample, strings.TrimRight(s, " "))
			}
		}
	}
	if fenced {
		return nil, fmt.Errorf("the fenced block after %q does not end", heading)
	}
	return blocks, nil
}

// number is a number in a sample line, and in a line of output.
var number = regexp.MustCompile(`\d+(?:\.\d+)?`)

// sampleLine is the regexp of sample line s, which a whole line of
// output must match: "…" stands for any text, the rest is literal but
// that, with anyNumber, each number stands for any number.
func sampleLine(s string, anyNumber bool) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for i, piece := range strings.Split(s, "…") {
		if i > 0 {
			b.WriteString(".*")
		}
		last := 0
		if anyNumber {
			for _, m := range number.FindAllStringIndex(piece, -1) {
				b.WriteString(regexp.QuoteMeta(piece[last:m[0]]))
				b.WriteString(number.String())
				last = m[1]
			}
		}
		b.WriteString(regexp.QuoteMeta(piece[last:]))
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// matchSample says where out, a block's output lines, differs from its
// sample: each sample line but "…" must match a line of out, in order
// (lines between them are what "…" and the shortening left out), and
// the last one, unless it is "…", the last line of out.
func matchSample(sample, out []string, anyNumber bool) error {
	for len(out) > 0 && strings.TrimSpace(out[len(out)-1]) == "" {
		out = out[:len(out)-1]
	}
	var want []string
	for _, s := range sample {
		if s != "…" {
			want = append(want, s)
		}
	}
	endsOpen := len(sample) == 0 || sample[len(sample)-1] == "…"
	at := 0 // the first line of out the next sample line may match
	for k, s := range want {
		re := sampleLine(s, anyNumber)
		if k == len(want)-1 && !endsOpen {
			if len(out) <= at || !re.MatchString(strings.TrimRight(out[len(out)-1], " ")) {
				return fmt.Errorf("sample line %q is not the last line of the output", s)
			}
			return nil
		}
		for at < len(out) && !re.MatchString(strings.TrimRight(out[at], " ")) {
			at++
		}
		if at == len(out) {
			if k > 0 {
				return fmt.Errorf("sample line %q matches no line of the output after the one of %q", s, want[k-1])
			}
			return fmt.Errorf("sample line %q matches no line of the output", s)
		}
		at++
	}
	return nil
}

// TestShellBlocks: sh and bash blocks are found with the heading above
// them and their sample lines; other blocks, and "#" lines outside
// blocks or in them, are not samples.
func TestShellBlocks(t *testing.T) {
	md := "# Title\n\n## 1. One\n\n```sh\nmake build\n# built\n#not a sample\n```\n\n" +
		"```python\n# DGL: not run\nx = 1\n```\n\n## 2. Two\n```bash\necho a\necho b\n# a\n# …\n```\n"
	blocks, err := shellBlocks(md)
	if err != nil {
		t.Fatal(err)
	}
	want := []block{
		{heading: "## 1. One", line: 5, script: "make build\n# built\n#not a sample\n", sample: []string{"built"}},
		{heading: "## 2. Two", line: 17, script: "echo a\necho b\n# a\n# …\n", sample: []string{"a", "…"}},
	}
	if !reflect.DeepEqual(blocks, want) {
		t.Fatalf("blocks:\n%#v\nwant:\n%#v", blocks, want)
	}
	if _, err := shellBlocks("## 1\n```sh\nmake\n"); err == nil || !strings.Contains(err.Error(), `after "## 1" does not end`) {
		t.Fatalf("an open fence: %v, want an error naming the heading", err)
	}
}

// TestMatchSample: the rule the tutorial's sample output is held to,
// passing and failing.
func TestMatchSample(t *testing.T) {
	out := []string{
		"read cora: 2708 nodes, 140/500/1000 train/val/test",
		"cleaned: 10556 edges",
		"    0  1.9465  0.143  12.1k    0%",
		"best epoch 6: val 0.7900 test 0.7800",
		"", // the blank line before the next block's mark
	}
	for _, tc := range []struct {
		sample    []string
		anyNumber bool
		err       string // "" when it matches
	}{
		{[]string{"read cora: 2708 nodes, 140/500/1000 train/val/test", "…"}, false, ""},
		{[]string{"cleaned: 10556 edges", "read cora: …", "…"}, false, `sample line "read cora: …" matches no line of the output after the one of "cleaned: 10556 edges"`},
		{[]string{"read cora: 2708 nodes, …", "…", "best epoch 6: val 0.7900 test 0.7800"}, false, ""},
		{[]string{"    0  1.9465  0.143  …", "…"}, false, ""},
		{[]string{"    0  1.9465  0.143…", "…"}, false, ""},
		{[]string{"    0  1.9465  0.143  12.1k", "…"}, false, `sample line "    0  1.9465  0.143  12.1k" matches no line of the output`},
		{[]string{"read cora: 2708 nodes, …"}, false, `sample line "read cora: 2708 nodes, …" is not the last line of the output`},
		{[]string{"best epoch 6: val 0.7900 test 0.7800", "…"}, false, ""},
		{[]string{"best epoch 12: val 0.8000 test 0.8100"}, false, "is not the last line"},
		{[]string{"best epoch 12: val 0.8000 test 0.8100"}, true, ""},
		{[]string{"best epoch 12: val 0.8000 loss 0.8100"}, true, "is not the last line"},
		{[]string{"read cora: 2708 nodes"}, true, "is not the last line"}, // whole lines only
		{[]string{"…"}, false, ""},
	} {
		err := matchSample(tc.sample, out, tc.anyNumber)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("sample %q (any number %v): %v, want %q", tc.sample, tc.anyNumber, err, tc.err)
		}
	}
}
