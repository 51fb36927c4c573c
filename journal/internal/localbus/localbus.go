// Package localbus is the in-process journal.Bus of the journals that
// live in one process (journal/bolt, journal/mem): each publishes what it
// committed, in commit order, and subscribers get it synchronously.
package localbus

import (
	"slices"
	"sync"

	"github.com/runhub/runhub/protocol"
)

// Bus is the in-process journal.Bus. The journal publishes each committed
// batch; subscribers are kept in copy-on-write slices so publishing takes
// the registry lock only to read two slice headers per run.
type Bus struct {
	mu     sync.RWMutex
	runs   map[string][]*subscriber
	feed   []*subscriber
	closed bool
}

// subscriber is one callback. mu is held while fn runs, so cancel can wait
// for a delivery in progress; off is set under mu by cancel.
type subscriber struct {
	fn  func(protocol.Envelope)
	mu  sync.Mutex
	off bool
}

// New returns an empty bus.
func New() *Bus {
	return &Bus{runs: make(map[string][]*subscriber)}
}

// SubscribeRun registers fn for the events of runID; see journal.Bus.
func (b *Bus) SubscribeRun(runID string, fn func(protocol.Envelope)) func() {
	sub := &subscriber{fn: fn}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return func() {}
	}
	b.runs[runID] = append(slices.Clip(b.runs[runID]), sub)
	return func() {
		b.remove(sub, func() {
			list := slices.DeleteFunc(slices.Clone(b.runs[runID]), func(s *subscriber) bool { return s == sub })
			if len(list) == 0 {
				delete(b.runs, runID)
			} else {
				b.runs[runID] = list
			}
		})
	}
}

// SubscribeFeed registers fn for the events of every run; see
// journal.Bus.
func (b *Bus) SubscribeFeed(fn func(protocol.Envelope)) func() {
	sub := &subscriber{fn: fn}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return func() {}
	}
	b.feed = append(slices.Clip(b.feed), sub)
	return func() {
		b.remove(sub, func() {
			b.feed = slices.DeleteFunc(slices.Clone(b.feed), func(s *subscriber) bool { return s == sub })
		})
	}
}

// remove turns sub off, waiting for a delivery to it in progress, and then
// drops it from the registry with drop (called under b.mu).
func (b *Bus) remove(sub *subscriber, drop func()) {
	sub.mu.Lock()
	already := sub.off
	sub.off = true
	sub.mu.Unlock()
	if already {
		return
	}
	b.mu.Lock()
	drop()
	b.mu.Unlock()
}

// Publish delivers committed events, in order, to the run subscribers of
// each event's run and to the feed.
func (b *Bus) Publish(events []protocol.Envelope) {
	if len(events) == 0 {
		return
	}
	b.mu.RLock()
	if b.closed || (len(b.runs) == 0 && len(b.feed) == 0) {
		b.mu.RUnlock()
		return
	}
	feed := b.feed
	// Events of one run are usually adjacent in a batch; look its
	// subscribers up once per stretch.
	type stretch struct {
		subs   []*subscriber
		events []protocol.Envelope
	}
	var stretches []stretch
	for i := 0; i < len(events); {
		j := i + 1
		for j < len(events) && events[j].RunID == events[i].RunID {
			j++
		}
		if subs := b.runs[events[i].RunID]; len(subs) > 0 {
			stretches = append(stretches, stretch{subs, events[i:j]})
		}
		i = j
	}
	b.mu.RUnlock()

	for _, st := range stretches {
		for _, sub := range st.subs {
			sub.deliver(st.events)
		}
	}
	for _, sub := range feed {
		sub.deliver(events)
	}
}

func (s *subscriber) deliver(events []protocol.Envelope) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range events {
		if s.off {
			return
		}
		s.fn(e)
	}
}

// Close stops all delivery; later subscriptions are inert.
func (b *Bus) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.runs = make(map[string][]*subscriber)
	b.feed = nil
}
