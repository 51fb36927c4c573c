// Package localstreams is the in-process notification of stream changes
// that the journals living in one process share (journal.StreamStore's
// SubscribeStream and NotifyStream).
package localstreams

import "sync"

// Hub fans a stream's change out to its subscribers. The zero value is
// ready to use.
type Hub struct {
	mu   sync.Mutex
	next uint64
	subs map[string]map[uint64]func()
}

// Subscribe calls fn on every Notify of name until cancel.
func (h *Hub) Subscribe(name string, fn func()) (cancel func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = map[string]map[uint64]func(){}
	}
	h.next++
	id := h.next
	m := h.subs[name]
	if m == nil {
		m = map[uint64]func(){}
		h.subs[name] = m
	}
	m[id] = fn
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if m := h.subs[name]; m != nil {
			delete(m, id)
			if len(m) == 0 {
				delete(h.subs, name)
			}
		}
	}
}

// Notify calls every subscriber of name (fn must not block).
func (h *Hub) Notify(name string) {
	h.mu.Lock()
	fns := make([]func(), 0, len(h.subs[name]))
	for _, fn := range h.subs[name] {
		fns = append(fns, fn)
	}
	h.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}
