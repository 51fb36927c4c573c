package mem

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/internal/localstreams"
)

// streamData is what the Store holds of durable streams: each meta as
// the JSON a backend would store (so that no caller shares its maps), and
// the records of each generation.
type streamData struct {
	mu      sync.Mutex
	metas   map[string][]byte
	records map[string][]journal.StreamRecord // name + "\x00" + gen
	hub     localstreams.Hub
}

// Streams returns the durable streams held in s.
func (s *Store) Streams(l journal.StreamLimits) journal.Streams {
	return journal.NewStreams(StreamStore{s}, l)
}

// Docs returns the documents held in s (journal.Docs).
func (s *Store) Docs() journal.Docs { return journal.NewDocs(StreamStore{s}) }

// StreamStore is the journal.StreamStore of a Store.
type StreamStore struct{ s *Store }

// StreamStore returns s's journal.StreamStore (for a caller that wraps it).
func (s *Store) StreamStore() StreamStore { return StreamStore{s} }

var _ journal.StreamStore = StreamStore{}

func (ss StreamStore) data() (*streamData, error) {
	ss.s.d.mu.RLock()
	closed := ss.s.d.closed
	ss.s.d.mu.RUnlock()
	if closed {
		return nil, journal.ErrClosed
	}
	return &ss.s.d.streams, nil
}

// LoadStream implements journal.StreamStore.
func (ss StreamStore) LoadStream(_ context.Context, name string) (journal.StreamMeta, error) {
	d, err := ss.data()
	if err != nil {
		return journal.StreamMeta{}, err
	}
	d.mu.Lock()
	raw, ok := d.metas[name]
	d.mu.Unlock()
	var m journal.StreamMeta
	if !ok {
		return m, journal.ErrNotFound
	}
	err = json.Unmarshal(raw, &m)
	return m, err
}

// StreamRecords implements journal.StreamStore.
func (ss StreamStore) StreamRecords(_ context.Context, name, gen string, from, to uint64) ([]journal.StreamRecord, error) {
	d, err := ss.data()
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	recs := d.records[name+"\x00"+gen]
	var out []journal.StreamRecord
	for i := from; i <= to && i >= 1 && i <= uint64(len(recs)); i++ {
		out = append(out, recs[i-1])
	}
	return out, nil
}

// CommitStream implements journal.StreamStore.
func (ss StreamStore) CommitStream(_ context.Context, name string, prev uint64, next journal.StreamMeta, recs []journal.StreamRecord) error {
	d, err := ss.data()
	if err != nil {
		return err
	}
	raw, err := json.Marshal(next)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.metas == nil {
		d.metas, d.records = map[string][]byte{}, map[string][]journal.StreamRecord{}
	}
	var cur uint64
	if old, ok := d.metas[name]; ok {
		var m journal.StreamMeta
		if err := json.Unmarshal(old, &m); err != nil {
			return err
		}
		cur = m.Version
	}
	if cur != prev {
		return journal.ErrConflict
	}
	d.metas[name] = raw
	key := name + "\x00" + next.Gen
	for _, r := range recs {
		r.Data = append([]byte(nil), r.Data...)
		d.records[key] = append(d.records[key], r)
	}
	return nil
}

// DropStream implements journal.StreamStore.
func (ss StreamStore) DropStream(_ context.Context, name string, version uint64) error {
	d, err := ss.data()
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	old, ok := d.metas[name]
	if !ok {
		return journal.ErrNotFound
	}
	var m journal.StreamMeta
	if err := json.Unmarshal(old, &m); err != nil {
		return err
	}
	if m.Version != version {
		return journal.ErrConflict
	}
	delete(d.metas, name)
	delete(d.records, name+"\x00"+m.Gen)
	return nil
}

// ExpiringStreams implements journal.StreamStore.
func (ss StreamStore) ExpiringStreams(_ context.Context) ([]string, error) {
	d, err := ss.data()
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for name, raw := range d.metas {
		var m journal.StreamMeta
		if json.Unmarshal(raw, &m) == nil && m.Expiring() {
			out = append(out, name)
		}
	}
	return out, nil
}

// SubscribeStream implements journal.StreamStore.
func (ss StreamStore) SubscribeStream(name string, fn func()) func() {
	return ss.s.d.streams.hub.Subscribe(name, fn)
}

// NotifyStream implements journal.StreamStore.
func (ss StreamStore) NotifyStream(_ context.Context, name string) { ss.s.d.streams.hub.Notify(name) }
