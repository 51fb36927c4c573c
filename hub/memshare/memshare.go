// Package memshare is what hubs in one process share in memory: the
// socket count per subject (hub.SocketCounter) and session presence
// (hub.PresenceStore), the in-memory counterparts of hub/redislimit and
// hub/redispresence behind the same interfaces. A Space is what the hubs
// share; each hub takes its own handles from it (Counter, Presence).
//
// Nothing lapses: a hub's claims and entries live until it releases them
// or closes its handle, since hubs in one process die together.
package memshare

import (
	"context"
	"sync"
)

// Space is the state hubs in one process share. Its methods and its
// handles' are safe for concurrent use.
type Space struct {
	mu       sync.Mutex
	sockets  map[string]map[string]struct{}  // subject → socket ids
	presence map[string]map[*Presence][]byte // target → each hub's entry
	subs     map[*subscription]struct{}      // every hub's subscriptions
}

// New returns an empty Space.
func New() *Space {
	return &Space{sockets: map[string]map[string]struct{}{}, presence: map[string]map[*Presence][]byte{},
		subs: map[*subscription]struct{}{}}
}

// Counter is a hub's handle on the shared socket counts; it implements
// hub.SocketCounter.
type Counter struct{ s *Space }

// Counter returns a socket counter on the space.
func (s *Space) Counter() *Counter { return &Counter{s: s} }

// Claim counts socket id of subject unless the subject already has limit
// sockets over all hubs of the space (limit ≤ 0: no bound); it reports
// whether it did. A socket claimed already is counted once.
func (c *Counter) Claim(ctx context.Context, subject, id string, limit int) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	ids := c.s.sockets[subject]
	if _, ok := ids[id]; ok {
		return true, nil
	}
	if limit > 0 && len(ids) >= limit {
		return false, nil
	}
	if ids == nil {
		ids = map[string]struct{}{}
		c.s.sockets[subject] = ids
	}
	ids[id] = struct{}{}
	return true, nil
}

// Release uncounts a claimed socket.
func (c *Counter) Release(subject, id string) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	delete(c.s.sockets[subject], id)
	if len(c.s.sockets[subject]) == 0 {
		delete(c.s.sockets, subject)
	}
}

// Presence is a hub's handle on the shared presence; it implements
// hub.PresenceStore.
type Presence struct{ s *Space }

// Presence returns a presence handle on the space for one hub.
func (s *Space) Presence() *Presence { return &Presence{s: s} }

// announceBuffer bounds the announcements waiting for one subscriber; past
// it they are dropped, as a pub/sub message can be: a hub re-reads what it
// shows periodically.
const announceBuffer = 1024

// subscription is one Subscribe: its own goroutine calls fn.
type subscription struct {
	from *Presence
	ch   chan string
}

// Put replaces this hub's entry of each target (an empty one removes it)
// and announces the targets to the other hubs' subscriptions.
func (p *Presence) Put(ctx context.Context, entries map[string][]byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	for target, e := range entries {
		p.putLocked(target, e)
	}
	for sub := range p.s.subs {
		if sub.from == p {
			continue
		}
		for target := range entries {
			select {
			case sub.ch <- target:
			default:
			}
		}
	}
	return nil
}

func (p *Presence) putLocked(target string, e []byte) {
	byHub := p.s.presence[target]
	if len(e) == 0 {
		delete(byHub, p)
		if len(byHub) == 0 {
			delete(p.s.presence, target)
		}
		return
	}
	if byHub == nil {
		byHub = map[*Presence][]byte{}
		p.s.presence[target] = byHub
	}
	byHub[p] = append([]byte(nil), e...)
}

// Get returns the entries of every hub, this one's included, of each
// target.
func (p *Presence) Get(ctx context.Context, targets []string) (map[string][][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	out := make(map[string][][]byte, len(targets))
	for _, target := range targets {
		for _, e := range p.s.presence[target] {
			out[target] = append(out[target], append([]byte(nil), e...))
		}
	}
	return out, nil
}

// Subscribe calls fn with every target another hub announces, from a
// goroutine that cancel stops and waits for.
func (p *Presence) Subscribe(fn func(target string)) (cancel func()) {
	sub := &subscription{from: p, ch: make(chan string, announceBuffer)}
	p.s.mu.Lock()
	p.s.subs[sub] = struct{}{}
	p.s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for target := range sub.ch {
			fn(target)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.s.mu.Lock()
			delete(p.s.subs, sub)
			close(sub.ch) // no Put sends on it any more
			p.s.mu.Unlock()
			<-done
		})
	}
}

// Close withdraws this hub's entries, announcing them to the other hubs.
func (p *Presence) Close() {
	p.s.mu.Lock()
	var mine []string
	for target, byHub := range p.s.presence {
		if _, ok := byHub[p]; ok {
			mine = append(mine, target)
		}
	}
	p.s.mu.Unlock()
	gone := make(map[string][]byte, len(mine))
	for _, t := range mine {
		gone[t] = nil
	}
	_ = p.Put(context.Background(), gone)
}
