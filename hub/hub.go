package hub

import (
	"context"
	"time"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/hub/metrics"
	"github.com/runhub/runhub/journal"
)

// New starts a hub over a journal and a runtime.
func New(cfg Config, store journal.Store, runtime adapter.RuntimeAdapter) *Hub {
	cfg.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	h := &Hub{cfg: cfg, store: store, runtime: runtime, log: cfg.Logger,
		ctx: ctx, cancel: cancel, conns: map[*conn]struct{}{}, sockets: map[string]int{}}
	h.router = newRouter(h)
	h.tracker = newTracker(h)
	h.presence = newPresence(h)
	h.senders = newSenders()
	h.env = socketEnv{cfg: &h.cfg, log: h.log, metrics: h.cfg.Metrics, store: store,
		router: h.router, tracker: h.tracker, presence: h.presence, hub: h}
	h.tracker.start()
	h.router.interest = h.tracker.interest
	h.router.start()
	h.presence.start()
	for _, s := range h.senders {
		s.start()
	}
	return h
}

// ID returns the hub's replica id.
func (h *Hub) ID() string { return h.cfg.HubID }

// Draining reports whether Shutdown has begun.
func (h *Hub) Draining() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.draining
}

// Conns returns the number of open sockets.
func (h *Hub) Conns() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

// Goaway tells every open socket to reconnect elsewhere (goaway with
// reason, then close 1012) and returns how many it told; the hub goes on
// serving. A hub that cannot reach its journal's Redis does it: it can
// deliver its tabs nothing, a healthy replica can.
func (h *Hub) Goaway(reason string) int {
	h.mu.Lock()
	conns := make([]*conn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		c.goaway(reason, h.cfg.GoawayReconnect)
	}
	return len(conns)
}

// Shutdown sends goaway to every socket, closes them with 1012 and stops the
// hub's goroutines. Runs are not touched: the runtime decides their fate.
func (h *Hub) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	h.draining = true
	conns := make([]*conn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	settle(ctx, conns)
	for _, c := range conns {
		c.goaway("server shutting down", h.cfg.GoawayReconnect)
	}
	done := make(chan struct{})
	go func() {
		h.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		for _, c := range conns {
			c.abort()
		}
	}
	h.stopOnce.Do(func() {
		h.presence.stop()
		h.tracker.stop()
		h.router.stop()
		for _, s := range h.senders {
			s.stop()
		}
		h.cancel()
		// Sockets do not derive their context from the hub's (newConn):
		// any still open end here too.
		h.mu.Lock()
		for c := range h.conns {
			c.cancel()
		}
		h.mu.Unlock()
	})
	h.wg.Wait()
	h.pollMu.Lock()
	if h.poller != nil && !h.pollStopped {
		h.poller.Stop() // every socket has ended
	}
	h.pollStopped = true
	h.pollMu.Unlock()
	return err
}

// Stats reports queue depths; it takes every socket's lock briefly.
func (h *Hub) Stats() metrics.HubStats {
	h.mu.Lock()
	conns := make([]*conn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	s := metrics.HubStats{Sockets: len(conns)}
	for _, c := range conns {
		c.out.addStats(&s)
	}
	h.tracker.mu.Lock()
	s.Watched = len(h.tracker.sessions)
	h.tracker.mu.Unlock()
	h.router.mu.RLock()
	for _, f := range h.router.feeds {
		if f.runID != "" {
			s.FocusedRuns++
		}
	}
	h.router.mu.RUnlock()
	return s
}

// maxSettle bounds how long a shutdown waits for the sockets to settle.
const maxSettle = 2 * time.Second

// settle gives every focused socket up to maxSettle (within ctx) to
// deliver what its focus's journal holds (conn.settle). Past it the goaway
// goes out anyway: the tab's cursor replays the rest when it reconnects.
func settle(ctx context.Context, conns []*conn) {
	ctx, cancel := context.WithTimeout(ctx, maxSettle)
	defer cancel()
	waits := make([]<-chan struct{}, len(conns))
	for i, c := range conns {
		waits[i] = c.settle()
	}
	for i, w := range waits {
		select {
		case <-w:
		case <-conns[i].ctx.Done():
		case <-ctx.Done():
			return
		}
	}
}
