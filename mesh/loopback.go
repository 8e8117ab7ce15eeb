package mesh

import "net"

// LoopbackAddrs returns n distinct 127.0.0.1 UDP addresses nobody listens
// on now, for the nodes of a cluster on one host (node demo, tests,
// benchmarks). Every socket is held until all are chosen: a port released
// at once may be handed out again, and two peers given one address fail
// their config check. Another process may still take a port between this
// call and its node's bind; the caller starts again on other ports then.
func LoopbackAddrs(n int) ([]string, error) {
	conns := make([]*net.UDPConn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	addrs := make([]string, n)
	for i := range addrs {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
		addrs[i] = c.LocalAddr().String()
	}
	return addrs, nil
}
