package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"graphnode/node/client"
)

// watchdogInterval is how often systemd wants WATCHDOG=1 from process
// self (WatchdogSec= of the unit: systemd sets WATCHDOG_USEC, and
// WATCHDOG_PID to the process it watches); 0 when it wants none.
func watchdogInterval(usec, pid string, self int) (time.Duration, error) {
	if usec == "" {
		return 0, nil
	}
	if pid != "" {
		p, err := strconv.Atoi(pid)
		if err != nil {
			return 0, fmt.Errorf("WATCHDOG_PID=%q is not a process id", pid)
		}
		if p != self {
			return 0, nil // another process of the service is watched
		}
	}
	n, err := strconv.ParseUint(usec, 10, 63)
	if err != nil || n == 0 || n > uint64(24*time.Hour/time.Microsecond) {
		return 0, fmt.Errorf("WATCHDOG_USEC=%q is not a number of microseconds in (0, 24h]", usec)
	}
	return time.Duration(n) * time.Microsecond, nil
}

// watched is what the watchdog asks of the node besides its socket.
type watched interface {
	SocketLost() bool
	Alive(ctx context.Context) error
}

// watchdog sends WATCHDOG=1 every half interval for as long as the node
// answers a stats request on its own control socket within a quarter
// interval: the accept loop, the request path and the node's lock all
// work. A node that does not answer is not vouched for, and systemd
// restarts it (Restart=on-failure) once interval passes without a
// WATCHDOG=1. It returns when ctx ends (the node stops).
//
// A node whose socket file was removed (or replaced) while it ran cannot
// be asked through it, but is not wedged: it is vouched for while it
// answers in-process. The node binds its socket again by itself within
// a second when the path holds nothing, and else logs why not, once a
// minute. systemd's restart of it (SIGABRT, no drain) lost the kv rows
// trained since the last kv_save, which node kv save, through the same
// socket, could not save first.
func watchdog(ctx context.Context, sd *notifier, interval time.Duration, socket string, n watched, log *slog.Logger) {
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, interval/4)
		// A path that holds another node's socket answers for that node,
		// wedged as this one may be: the node is asked in-process then.
		lost := n.SocketLost()
		var err error
		if !lost {
			_, err = client.Stats(cctx, socket)
			lost = err != nil && n.SocketLost()
		}
		if lost {
			err = n.Alive(cctx)
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			log.Warn("watchdog: the node does not answer on its own control socket; systemd is not told it is alive", "socket", socket, "err", err)
			continue
		}
		sd.send("WATCHDOG=1")
	}
}
