package partition

import (
	"fmt"
	"strings"
)

// Policy says what ingestion does with an irregular input: a self loop, a
// duplicate edge, an edge to an unknown node, a node without a label.
// Every policy's effect is counted in Stats; none is silent.
type Policy string

const (
	Keep  Policy = "keep"  // keep it as it is
	Drop  Policy = "drop"  // drop it and count it
	Error Policy = "error" // stop with an error naming file and line
	Add   Policy = "add"   // dangling ids only: add the unknown node
)

// ParsePolicy parses a policy flag value and checks it is one of allowed.
func ParsePolicy(s string, allowed ...Policy) (Policy, error) {
	for _, p := range allowed {
		if string(p) == s {
			return p, nil
		}
	}
	names := make([]string, len(allowed))
	for i, p := range allowed {
		names[i] = string(p)
	}
	return "", fmt.Errorf("partition: policy %q: want one of %s", s, strings.Join(names, ", "))
}

// Progress reports how far a long step is: done out of total units (bytes
// read, edges written; total 0 when unknown). It may be nil.
type Progress func(stage string, done, total int64)

func (p Progress) report(stage string, done, total int64) {
	if p != nil {
		p(stage, done, total)
	}
}
