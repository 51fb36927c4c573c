package hub

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/runhub/runhub/journal"
)

// heldStore is a PresenceStore of one hub whose Put, once armed, stores
// the entries and then waits for release before it returns: the moment
// between a publish reaching the store and the hub recording it.
type heldStore struct {
	mu       sync.Mutex
	entries  map[string][]byte
	armed    bool
	held     chan struct{}
	released chan struct{}
}

func (s *heldStore) Put(_ context.Context, entries map[string][]byte) error {
	s.mu.Lock()
	for t, b := range entries {
		if b == nil {
			delete(s.entries, t)
		} else {
			s.entries[t] = b
		}
	}
	armed := s.armed
	s.armed = false
	s.mu.Unlock()
	if armed {
		close(s.held)
		<-s.released
	}
	return nil
}

func (s *heldStore) Get(_ context.Context, targets []string) (map[string][][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][][]byte{}
	for _, t := range targets {
		if b, ok := s.entries[t]; ok {
			out[t] = [][]byte{b}
		}
	}
	return out, nil
}

func (s *heldStore) Subscribe(func(string)) func() { return func() {} }

// A session's load that reads the store while a publish of this hub's
// entry has reached it but is not yet recorded as published must not count
// this hub's tab twice: the status would say two watchers, then one (a
// second status of a watch, seen in TestMemShare_WatchSendsEachStatusOnce).
func TestPresence_PrefetchDuringPublishCountsOnce(t *testing.T) {
	store := &heldStore{entries: map[string][]byte{}, armed: true, held: make(chan struct{}), released: make(chan struct{})}
	h := &Hub{ctx: context.Background()}
	h.cfg.defaults()
	h.cfg.PresenceStore = store
	h.tracker = newTracker(h)
	p := newPresence(h)
	h.presence = p
	h.tracker.sessions["s_1"] = &tracked{id: "s_1", owner: "alice"}
	p.mu.Lock()
	p.local["s:s_1"] = pentry{"alice": {W: 1}}
	p.dirty["s:s_1"] = struct{}{}
	p.mu.Unlock()
	want := computeFrom(map[string]pentry{"s:s_1": {"alice": {W: 1}}}, "s_1", "alice")

	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		p.flush()
	}()
	<-store.held // the store has this hub's entry; pub does not say so yet
	prefetched := make(chan struct{})
	go func() {
		defer close(prefetched)
		p.prefetch(context.Background(), journal.SessionMeta{ID: "s_1", Owner: "alice"})
	}()
	select {
	case <-prefetched:
	case <-time.After(300 * time.Millisecond): // waiting for the publish to be recorded, as it should
	}
	if got := p.lookup("s_1", "alice"); !reflect.DeepEqual(got, want) {
		t.Errorf("while the publish is being recorded: presence %+v, want %+v (this hub's one tab)", got, want)
	}
	close(store.released)
	<-flushed
	<-prefetched
	if got := p.lookup("s_1", "alice"); !reflect.DeepEqual(got, want) {
		t.Errorf("after the publish: presence %+v, want %+v", got, want)
	}
}
