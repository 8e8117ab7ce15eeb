package mesh

import (
	"net"
	"strconv"
	"testing"
)

// TestLoopbackAddrs: the chosen addresses are distinct, free, on
// 127.0.0.1, and outside the kernel's ephemeral range, from which a
// socket bound to port 0 (a QUIC client's) could take one before its node
// binds it.
func TestLoopbackAddrs(t *testing.T) {
	lo, hi := ephemeralRange()
	if lo < 1 || hi > 65535 || lo > hi {
		t.Fatalf("ephemeral range %d-%d", lo, hi)
	}
	addrs, err := LoopbackAddrs(32)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 32 {
		t.Fatalf("%d addresses, want 32", len(addrs))
	}
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] {
			t.Fatalf("%s chosen twice", a)
		}
		seen[a] = true
		host, port, err := net.SplitHostPort(a)
		if err != nil || host != "127.0.0.1" {
			t.Fatalf("address %q: host %q, %v", a, host, err)
		}
		p, _ := strconv.Atoi(port)
		if p >= lo && p <= hi || p < 1024 {
			t.Errorf("%s: port inside the ephemeral range %d-%d or privileged", a, lo, hi)
		}
		c, err := net.ListenPacket("udp", a)
		if err != nil {
			t.Fatalf("chosen address %s is not free: %v", a, err)
		}
		c.Close()
	}
	// A port bound to 0 comes from the ephemeral range, so it is never
	// one LoopbackAddrs would choose.
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p := c.LocalAddr().(*net.UDPAddr).Port; p < lo || p > hi {
		t.Fatalf("port 0 bound %d, outside the range %d-%d read from the kernel", p, lo, hi)
	}
}
