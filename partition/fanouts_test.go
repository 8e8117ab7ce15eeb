package partition

import (
	"math"
	"strings"
	"testing"
)

func TestValidFanouts(t *testing.T) {
	for _, c := range []struct {
		fanouts []int
		want    string // "" = valid
	}{
		{[]int{15, 10, 5}, ""},
		{[]int{-1, 0, math.MaxInt32}, ""},
		{nil, "want 1 to 32 hops"},
		{make([]int, 33), "want 1 to 32 hops"},
		{[]int{5, -2}, "hop 2 is -2, want -1 (all) or a count from 0 to 2147483647"},
		{[]int{math.MaxInt32 + 1}, "hop 1 is 2147483648, want -1 (all) or a count from 0 to 2147483647"},
	} {
		err := ValidFanouts(c.fanouts)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("ValidFanouts(%v) = %v, want nil", c.fanouts, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("ValidFanouts(%v) = %v, want an error containing %q", c.fanouts, err, c.want)
		}
	}
}
