package redis

import (
	"context"
	"hash/fnv"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/runhub/runhub/journal/internal/localstreams"
)

// Durable streams' change notices go by interest: a stream's name falls in
// one of Shards partitions (FNV-1a of the name), each with its channel
// "<prefix>{<tag of shard n>}:ds:notify", and a Store subscribes to a
// partition's channel only while it has live readers of a stream in it.
// A commit is published on its partition's channel only, so a hub
// receives the notices of the partitions its readers are in, not every
// commit of the cluster. On a Redis Cluster the channels are sharded
// (SSUBSCRIBE, SPUBLISH: Redis 7), each served by the master of its
// shard's slot, so notices spread over the masters like the feed.

// streamNotifier is the Store's subscriptions to the notify channels: one
// go-redis PubSub per group of partitions (one on a single Redis, one per
// partition on a Cluster), made with the group's first reader and ended by
// Close, relayed to this node's readers (localstreams.Hub).
type streamNotifier struct {
	hub    localstreams.Hub
	mu     sync.Mutex
	parts  map[int]*notifyPart
	groups map[int]*goredis.PubSub
}

// notifyPart is one partition's subscription.
type notifyPart struct {
	refs  int
	ready chan struct{} // closed once Redis confirmed the subscription
	done  bool
}

func (k keyspace) streamsNotify(n int) string { return k.base(n) + "ds:notify" }

// notifyPartOf is the partition of a stream's name.
func (k keyspace) notifyPartOf(name string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return int(h.Sum32() % uint32(len(k.tags)))
}

// subscribeStream calls fn on every change of name, on any node, from the
// moment it returns (it waits, at most Options.Timeout, for Redis to
// confirm the partition's subscription when it is new) until cancel.
func (s *Store) subscribeStream(name string, fn func()) func() {
	cancel := s.streams.hub.Subscribe(name, fn)
	n := s.k.notifyPartOf(name)
	ready := s.wantNotices(n)
	if ready != nil {
		ctx, stop := context.WithTimeout(s.ctx, s.opts.Timeout)
		select {
		case <-ready:
		case <-ctx.Done():
		}
		stop()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			s.unwantNotices(n)
		})
	}
}

// wantNotices adds a reader in partition n, subscribing to its channel
// with the first; it returns what to wait on (nil: nothing).
func (s *Store) wantNotices(n int) chan struct{} {
	st := &s.streams
	st.mu.Lock()
	defer st.mu.Unlock()
	if s.closed.Load() {
		return nil
	}
	if st.parts == nil {
		st.parts, st.groups = map[int]*notifyPart{}, map[int]*goredis.PubSub{}
	}
	p := st.parts[n]
	if p == nil {
		p = &notifyPart{ready: make(chan struct{})}
		st.parts[n] = p
	}
	if p.refs++; p.refs > 1 {
		return p.ready
	}
	ctx, stop := context.WithTimeout(s.ctx, s.opts.Timeout)
	defer stop()
	ch := s.k.streamsNotify(n)
	g := s.groupOf(n)
	ps := st.groups[g]
	var err error
	switch {
	case ps == nil && s.cluster:
		ps = s.rdb.SSubscribe(ctx, ch)
	case ps == nil:
		ps = s.rdb.Subscribe(ctx, ch)
	case s.cluster:
		err = ps.SSubscribe(ctx, ch)
	default:
		err = ps.Subscribe(ctx, ch)
	}
	if err != nil {
		// go-redis subscribes again once it reconnects; the readers
		// look again every few seconds meanwhile.
		s.opts.Logger.Warn("journal/redis: stream notices: subscribe", "channel", ch, "err", err)
	}
	if st.groups[g] == nil {
		st.groups[g] = ps
		if !s.goTail(func() { s.relayNotices(ps) }) {
			_ = ps.Close()
		}
	}
	return p.ready
}

// unwantNotices removes a reader of partition n; the last one out
// unsubscribes.
func (s *Store) unwantNotices(n int) {
	st := &s.streams
	st.mu.Lock()
	defer st.mu.Unlock()
	p := st.parts[n]
	if p == nil {
		return
	}
	if p.refs--; p.refs > 0 {
		return
	}
	delete(st.parts, n)
	ps := st.groups[s.groupOf(n)]
	if ps == nil || s.closed.Load() {
		return
	}
	ctx, stop := context.WithTimeout(s.ctx, s.opts.Timeout)
	defer stop()
	ch := s.k.streamsNotify(n)
	var err error
	if s.cluster {
		err = ps.SUnsubscribe(ctx, ch)
	} else {
		err = ps.Unsubscribe(ctx, ch)
	}
	if err != nil && !s.closed.Load() {
		s.opts.Logger.Warn("journal/redis: stream notices: unsubscribe", "channel", ch, "err", err)
	}
}

// relayNotices hands every notice of ps to this node's readers, and each
// confirmation of a subscription to those waiting for it, until Close.
func (s *Store) relayNotices(ps *goredis.PubSub) {
	defer ps.Close()
	ch := ps.ChannelWithSubscriptions()
	for {
		select {
		case <-s.ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			switch m := m.(type) {
			case *goredis.Message:
				s.reads.notifyMessages.Add(1)
				s.reads.notifyBytes.Add(uint64(len(m.Channel) + len(m.Payload)))
				s.streams.hub.Notify(m.Payload)
			case *goredis.Subscription:
				if m.Kind == "subscribe" || m.Kind == "ssubscribe" {
					s.confirmNotices(m.Channel)
				}
			}
		}
	}
}

// confirmNotices wakes those waiting for the subscription of channel.
func (s *Store) confirmNotices(channel string) {
	st := &s.streams
	st.mu.Lock()
	defer st.mu.Unlock()
	for n, p := range st.parts {
		if s.k.streamsNotify(n) == channel && !p.done {
			p.done = true
			close(p.ready)
		}
	}
}

// notifyStream tells this node's readers of name at once, and the other
// nodes' through the channel of name's partition.
func (s *Store) notifyStream(ctx context.Context, name string) {
	s.streams.hub.Notify(name)
	ch := s.k.streamsNotify(s.k.notifyPartOf(name))
	var err error
	if s.cluster {
		err = s.rdb.SPublish(ctx, ch, name).Err()
	} else {
		err = s.rdb.Publish(ctx, ch, name).Err()
	}
	if err != nil && !s.closed.Load() {
		s.opts.Logger.Warn("journal/redis: stream notify", "err", err)
	}
}
