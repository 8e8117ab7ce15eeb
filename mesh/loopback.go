package mesh

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// LoopbackAddrs returns n distinct 127.0.0.1 UDP addresses nobody listens
// on now, for the nodes of a cluster on one host (node demo, tests,
// benchmarks). Every socket is held until all are chosen: a port released
// at once may be handed out again, and two peers given one address fail
// their config check.
//
// The ports lie outside the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), which is where every socket bound to
// port 0 gets its port: an outgoing QUIC connection of another process,
// or of this one, takes ports from there, and one of them took a chosen
// port between this call and its node's bind often enough to fail tests
// run side by side. Outside that range only a program that names its port
// can take one; the caller starts again on other ports then.
func LoopbackAddrs(n int) ([]string, error) {
	lo, hi := ephemeralRange()
	// Ports from 1024 up to the range, and above it: every port a
	// program not run by root may bind and the kernel does not hand out.
	free := []int{}
	for p := 1024; p < 65536; p++ {
		if p < lo || p > hi {
			free = append(free, p)
		}
	}
	rand.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
	conns := make([]*net.UDPConn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	addrs := make([]string, 0, n)
	for _, p := range free {
		if len(addrs) == n {
			break
		}
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p})
		if errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, syscall.EACCES) {
			continue
		}
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
		addrs = append(addrs, c.LocalAddr().String())
	}
	if len(addrs) < n {
		return nil, errors.New("mesh: " + strconv.Itoa(n) + " free 127.0.0.1 UDP ports wanted outside the ephemeral range " +
			strconv.Itoa(lo) + "-" + strconv.Itoa(hi) + ", found " + strconv.Itoa(len(addrs)))
	}
	return addrs, nil
}

// ephemeralRange is the kernel's range of ports for sockets bound to
// port 0, from /proc/sys/net/ipv4/ip_local_port_range, or Linux's default
// when that cannot be read.
func ephemeralRange() (lo, hi int) {
	lo, hi = 32768, 60999
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return lo, hi
	}
	l, err1 := strconv.Atoi(f[0])
	h, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || l > h {
		return lo, hi
	}
	return l, h
}
