package node

// Loaders ending: the drain of the node's stop and the deadline of its
// last answers, and the loader slots that closing loaders give back to
// the opens waiting for one (release, holding, awaitSlot).

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// drain stops every loader; called once the listener is closed. A loader
// still starting is not closed here: drain waits until it has started
// (and closes it with the others) or refused with "node is stopping".
func (n *Node) drain() {
	n.mu.Lock()
	if !n.mu.draining {
		if n.stopping != nil {
			close(n.stopping)
		}
		n.mu.drainBy = time.Now().Add(n.cfg.DrainTimeoutDuration())
	}
	n.mu.draining = true
	n.mu.Unlock()
	n.starting.Wait()
	n.mu.Lock()
	ls := make([]*loader, 0, len(n.mu.loaders))
	for _, l := range n.mu.loaders {
		ls = append(ls, l)
	}
	n.mu.Unlock()
	if len(ls) > 0 {
		n.status(fmt.Sprintf("stopping: draining %d loaders", len(ls)))
		n.log.Info("draining", "loaders", len(ls))
	} else {
		n.status("stopping")
	}
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Go(func() { n.closeLoader(l, "node stopping") })
	}
	wg.Wait()
}

// answerGrace is how long a control connection still has to take the
// answer to its request in hand once the drain has ended (answerDeadline).
const answerGrace = time.Second

// answerDeadline is the write deadline of a control connection once the
// node stops serving it: the end of the drain's samplers.drain_timeout,
// or answerGrace from now if that is later. The answer to the request in
// hand (an open_loader refused with "node is stopping") reaches a client
// that reads, and one that pipelines requests without reading holds the
// shutdown up to the drain's bound and answerGrace, not a whole drain
// timeout more (a drain_timeout of half the unit's TimeoutStopSec then
// left the kv checkpoint no time at all).
func (n *Node) answerDeadline() time.Time {
	n.mu.Lock()
	by := n.mu.drainBy
	n.mu.Unlock()
	if grace := time.Now().Add(answerGrace); by.Before(grace) {
		return grace
	}
	return by
}

// beginRelease counts a closing under way that will give loader slots
// back (mu.releasing, see awaitSlot); endRelease ends it.
func (n *Node) beginRelease() {
	n.mu.Lock()
	n.mu.releasing++
	n.signalReleasedLocked()
	n.mu.Unlock()
}

func (n *Node) endRelease() {
	n.mu.Lock()
	n.mu.releasing--
	n.signalReleasedLocked()
	n.mu.Unlock()
}

// signalReleasedLocked wakes awaitSlot. n.mu must be held.
func (n *Node) signalReleasedLocked() {
	if n.mu.released != nil {
		close(n.mu.released)
		n.mu.released = nil
	}
}

// holding records that c owns loaders (held) or no longer does.
func (n *Node) holding(c *net.UnixConn, held bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !held {
		delete(n.mu.holders, c)
		return
	}
	if n.mu.holders == nil {
		n.mu.holders = map[*net.UnixConn]struct{}{}
	}
	n.mu.holders[c] = struct{}{}
}

// holderGoneLocked reports whether the trainer of a connection that owns
// loaders has hung up, though the node may not have read the end yet:
// the kernel has marked the socket as soon as the trainer closed it. So
// has a client node whose connection of a remote loader has ended
// before the loader's close has begun (context.AfterFunc runs it on a
// goroutine of its own: on a busy host a client node's next open came
// first, 1 in 20 reopens). n.mu must be held.
func (n *Node) holderGoneLocked() bool {
	for c := range n.mu.holders {
		if hungUp(c) {
			return true
		}
	}
	for _, l := range n.mu.loaders {
		if rl := l.remote; rl != nil && rl.conn.Err() != nil {
			return true
		}
	}
	return false
}

// hungUp reports whether c's peer has closed its end (POLLRDHUP or
// POLLHUP), without reading or waiting.
func hungUp(c *net.UnixConn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return true // closed here: its loaders are being closed
	}
	gone := false
	err = rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		if k, err := unix.Poll(fds, 0); err == nil && k > 0 {
			gone = fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP) != 0
		}
	})
	return gone || err != nil // closed here: its loaders are being closed
}

// awaitSlot returns once a loader may be reserved or none will be
// given back soon: while every samplers.max_loaders slot is held and a
// closing is under way (beginRelease), it waits for that to end,
// within ctx and samplers.drain_timeout (a closing's bound: its
// samplers are killed then) and until the node begins to drain. A
// trainer that closes its loader and opens the next (an evaluation
// loader per epoch) was refused with "node serves N loaders already"
// about every second time, its old samplers still stopping.
func (n *Node) awaitSlot(ctx context.Context) {
	t := time.NewTimer(n.cfg.DrainTimeoutDuration() + time.Second)
	defer t.Stop()
	for {
		n.mu.Lock()
		released := n.mu.released
		wait := !n.mu.draining && len(n.mu.loaders) >= n.cfg.Samplers.MaxLoaders &&
			(n.mu.releasing > 0 || n.holderGoneLocked())
		if wait && released == nil {
			released = make(chan struct{})
			n.mu.released = released
		}
		n.mu.Unlock()
		if !wait {
			return
		}
		select {
		case <-released:
		case <-ctx.Done():
			return
		case <-n.stopping:
			return
		case <-t.C:
			return
		}
	}
}
