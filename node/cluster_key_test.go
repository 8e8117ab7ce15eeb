package node

import "testing"

// TestRefusalKey: a peer whose certificate expired is refused with a
// message naming the current time; the refusal is the same one every
// round, and was logged every 2 s for as long as it lasted.
func TestRefusalKey(t *testing.T) {
	a := `mesh: peer h1 (127.0.0.1:21201, part 1): tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time 2026-11-29T10:14:30Z is after 2026-11-29T10:14:28Z: refused`
	b := `mesh: peer h1 (127.0.0.1:21201, part 1): tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time 2026-11-29T10:14:32Z is after 2026-11-29T10:14:28Z: refused`
	if refusalKey(a) != refusalKey(b) {
		t.Fatalf("one refusal, two keys:\n%s\n%s", refusalKey(a), refusalKey(b))
	}
	c := `mesh: peer h1 (127.0.0.1:21201, part 1): hello: serves another partitioning: refused`
	if refusalKey(a) == refusalKey(c) || refusalKey(c) != c {
		t.Fatalf("other refusals: %q, %q", refusalKey(a), refusalKey(c))
	}
}
