// Package mem is a journal held in memory: the whole journal.Store
// contract (it passes journal/journaltest, bus included) with nothing
// written anywhere. It is for tests that are not about a backend, and for
// a hub built in-process that keeps nothing (hub's Example); what it holds
// is lost when the process ends. The binary does not offer it.
package mem

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/internal/localbus"
	"github.com/runhub/runhub/protocol"
)

// Bounds of what the journal stores (as journal/bolt's).
const (
	MaxKeyLen   = 512 // an idempotency key
	MaxOwnerLen = 512 // a session's owner
)

// Options configure a Store.
type Options struct {
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Store is the in-memory journal. Its methods are safe for concurrent use.
type Store struct {
	d    *data
	opts Options
	bus  *localbus.Bus
	// pub orders publishing: taken under d.mu before it is released, so
	// events reach subscribers in the order they were committed.
	pub sync.Mutex
}

// data is what a Store holds; Reopen hands it to a new Store.
type data struct {
	mu       sync.RWMutex
	closed   bool // the Store over it is closed (Reopen opens it again)
	sessions map[string]*journal.SessionMeta
	owners   map[string][]string // owner → session ids, oldest first
	runs     map[string]*run
	streams  streamData // durable streams (streams.go), under its own lock
}

// run is a run's meta and events.
type run struct {
	meta   journal.RunMeta
	events []protocol.Envelope
	keys   map[string]uint64 // idempotency key → seq
}

// New returns an empty journal.
func New(opts Options) *Store {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{opts: opts, bus: localbus.New(), d: &data{sessions: map[string]*journal.SessionMeta{},
		owners: map[string][]string{}, runs: map[string]*run{}}}
}

// Reopen returns a new Store over what s holds, as a process reopening
// the same file would: s must be closed (Close) first.
func Reopen(s *Store) (*Store, error) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if !s.d.closed {
		return nil, fmt.Errorf("journal/mem: reopen of a store still open")
	}
	s.d.closed = false
	return &Store{opts: s.opts, bus: localbus.New(), d: s.d}, nil
}

var _ journal.Store = (*Store)(nil)

// Close stops delivery; every later call fails with journal.ErrClosed.
func (s *Store) Close() error {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if s.d.closed {
		return journal.ErrClosed
	}
	s.d.closed = true
	s.bus.Close()
	return nil
}

// read runs fn under the read lock.
func (s *Store) read(ctx context.Context, fn func(d *data) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.d.mu.RLock()
	defer s.d.mu.RUnlock()
	if s.d.closed {
		return journal.ErrClosed
	}
	return fn(s.d)
}

// write runs fn under the write lock and then publishes what it returns,
// in commit order.
func (s *Store) write(ctx context.Context, fn func(d *data) ([]protocol.Envelope, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.d.mu.Lock()
	if s.d.closed {
		s.d.mu.Unlock()
		return journal.ErrClosed
	}
	out, err := fn(s.d)
	s.pub.Lock()
	s.d.mu.Unlock()
	defer s.pub.Unlock()
	if err == nil {
		s.bus.Publish(out)
	}
	return err
}

// Append journals e; see journal.Log.
func (s *Store) Append(ctx context.Context, e protocol.Envelope, key string) (protocol.Envelope, error) {
	if len(key) > MaxKeyLen {
		return protocol.Envelope{}, protocol.Errorf(protocol.CodeTooLarge, "idempotency key: is %d bytes, limit %d", len(key), MaxKeyLen)
	}
	p, err := journal.Prepare(e, s.opts.Now())
	if err != nil {
		return protocol.Envelope{}, err
	}
	var stored protocol.Envelope
	err = s.write(ctx, func(d *data) ([]protocol.Envelope, error) {
		r := d.runs[p.RunID]
		switch {
		case r == nil:
			return nil, fmt.Errorf("run %q: %w", p.RunID, journal.ErrNotFound)
		case r.meta.SessionID != p.SessionID:
			return nil, protocol.Errorf(protocol.CodeBadRequest, "session_id: run %s belongs to session %s, not %s", p.RunID, r.meta.SessionID, p.SessionID)
		}
		if seq, ok := r.keys[key]; ok && key != "" {
			stored = r.events[seq-1]
			return nil, nil
		}
		if r.meta.Terminal {
			stored = r.events[len(r.events)-1]
			return nil, fmt.Errorf("run %q: %w", p.RunID, journal.ErrTerminal)
		}
		p.Seq = r.meta.LastSeq + 1
		p.EventID = p.RunID + ":" + strconv.FormatUint(p.Seq, 10)
		r.events = append(r.events, p)
		r.meta.LastSeq = p.Seq
		if key != "" {
			r.keys[key] = p.Seq
		}
		if p.Terminal {
			r.meta.Terminal, r.meta.TerminalType, r.meta.TerminalAt = true, p.Type, p.CreatedAt
			if m := d.sessions[r.meta.SessionID]; m != nil && m.ActiveRun == p.RunID {
				m.ActiveRun = ""
			}
		}
		stored = p
		return []protocol.Envelope{p}, nil
	})
	if err != nil && stored.EventID == "" {
		return protocol.Envelope{}, err
	}
	return stored, err
}

// Read returns up to limit events of the run after afterSeq; see
// journal.Log.
func (s *Store) Read(ctx context.Context, runID string, afterSeq uint64, limit int) ([]protocol.Envelope, error) {
	var out []protocol.Envelope
	err := s.read(ctx, func(d *data) error {
		r := d.runs[runID]
		if r == nil {
			return fmt.Errorf("run %q: %w", runID, journal.ErrNotFound)
		}
		if limit <= 0 || afterSeq >= r.meta.LastSeq {
			return nil
		}
		end := min(uint64(len(r.events)), afterSeq+uint64(limit))
		out = slices.Clone(r.events[afterSeq:end])
		return nil
	})
	return out, err
}

// Run returns a run's meta; see journal.Log.
func (s *Store) Run(ctx context.Context, runID string) (journal.RunMeta, error) {
	var m journal.RunMeta
	err := s.read(ctx, func(d *data) error {
		r := d.runs[runID]
		if r == nil {
			return fmt.Errorf("run %q: %w", runID, journal.ErrNotFound)
		}
		m = r.meta
		return nil
	})
	return m, err
}

// CreateSession registers a session; see journal.Registry.
func (s *Store) CreateSession(ctx context.Context, m journal.SessionMeta) error {
	if err := protocol.ValidID(m.ID); err != nil {
		return fmt.Errorf("session id: %w", err)
	}
	if len(m.Owner) > MaxOwnerLen {
		return protocol.Errorf(protocol.CodeTooLarge, "owner: is %d bytes, limit %d", len(m.Owner), MaxOwnerLen)
	}
	if m.CreatedAt == 0 {
		m.CreatedAt = protocol.Timestamp(s.opts.Now())
	}
	m.Runs, m.ActiveRun = []string{}, ""
	journal.RedactSession(&m)
	m = cloneSession(m)
	return s.write(ctx, func(d *data) ([]protocol.Envelope, error) {
		if d.sessions[m.ID] != nil {
			return nil, fmt.Errorf("session %q: %w", m.ID, journal.ErrExists)
		}
		d.sessions[m.ID] = &m
		d.owners[m.Owner] = append(d.owners[m.Owner], m.ID)
		return []protocol.Envelope{journal.SessionChangedRecord(m.ID)}, nil
	})
}

// Session returns a session's meta; see journal.Registry.
func (s *Store) Session(ctx context.Context, id string) (journal.SessionMeta, error) {
	var m journal.SessionMeta
	err := s.read(ctx, func(d *data) error {
		cur := d.sessions[id]
		if cur == nil {
			return fmt.Errorf("session %q: %w", id, journal.ErrNotFound)
		}
		m = cloneSession(*cur)
		return nil
	})
	return m, err
}

// Sessions lists an owner's sessions, oldest first; see journal.Registry.
func (s *Store) Sessions(ctx context.Context, owner string) ([]journal.SessionMeta, error) {
	out := []journal.SessionMeta{}
	err := s.read(ctx, func(d *data) error {
		for _, id := range d.owners[owner] {
			out = append(out, cloneSession(*d.sessions[id]))
		}
		return nil
	})
	return out, err
}

// SessionsPage lists a page of an owner's sessions; see journal.Registry.
func (s *Store) SessionsPage(ctx context.Context, owner, after string, limit int) ([]journal.SessionMeta, bool, error) {
	out := []journal.SessionMeta{}
	more := false
	err := s.read(ctx, func(d *data) error {
		ids := d.owners[owner]
		if after != "" {
			i := slices.Index(ids, after)
			if i < 0 {
				return fmt.Errorf("%w: session %q of %q", journal.ErrNotFound, after, owner)
			}
			ids = ids[i+1:]
		}
		more = len(ids) > limit
		for _, id := range ids[:min(limit, len(ids))] {
			out = append(out, cloneSession(*d.sessions[id]))
		}
		return nil
	})
	return out, more, err
}

// BeginRun registers a run as its session's active run; see
// journal.Registry.
func (s *Store) BeginRun(ctx context.Context, m journal.RunMeta) error {
	_, err := s.beginRun(ctx, m, nil)
	return err
}

// BeginRunUpdate is BeginRun and UpdateSession in one step; see
// journal.Queues.
func (s *Store) BeginRunUpdate(ctx context.Context, m journal.RunMeta, fn func(*journal.SessionMeta) error) (journal.SessionMeta, error) {
	return s.beginRun(ctx, m, fn)
}

// beginRun registers m, changing the session with fn (when set) in the
// same step.
func (s *Store) beginRun(ctx context.Context, m journal.RunMeta, fn func(*journal.SessionMeta) error) (journal.SessionMeta, error) {
	if err := protocol.ValidID(m.ID); err != nil {
		return journal.SessionMeta{}, fmt.Errorf("run id: %w", err)
	}
	if err := protocol.ValidID(m.SessionID); err != nil {
		return journal.SessionMeta{}, fmt.Errorf("session id: %w", err)
	}
	if len(m.Request) > 0 {
		m.Request = journal.RedactJSON(m.Request)
		if len(m.Request) > protocol.MaxPayloadBytes {
			return journal.SessionMeta{}, protocol.Errorf(protocol.CodeTooLarge, "request: is %d bytes, limit %d", len(m.Request), protocol.MaxPayloadBytes)
		}
		if !json.Valid(m.Request) {
			return journal.SessionMeta{}, protocol.Errorf(protocol.CodeBadRequest, "request: is not valid JSON")
		}
		m.Request = slices.Clone(m.Request)
	}
	if m.CreatedAt == 0 {
		m.CreatedAt = protocol.Timestamp(s.opts.Now())
	}
	m.LastSeq, m.Terminal, m.TerminalType, m.TerminalAt = 0, false, "", 0
	var out journal.SessionMeta
	err := s.write(ctx, func(d *data) ([]protocol.Envelope, error) {
		sm := d.sessions[m.SessionID]
		switch {
		case sm == nil:
			return nil, fmt.Errorf("session %q: %w", m.SessionID, journal.ErrNotFound)
		case d.runs[m.ID] != nil:
			return nil, fmt.Errorf("run %q: %w", m.ID, journal.ErrExists)
		case sm.ActiveRun != "":
			return nil, fmt.Errorf("session %q has active run %q: %w", m.SessionID, sm.ActiveRun, journal.ErrConflict)
		}
		if fn != nil {
			if err := updateSession(sm, fn); err != nil {
				return nil, err
			}
		}
		if m.Owner == "" {
			m.Owner = sm.Owner
		}
		d.runs[m.ID] = &run{meta: m, keys: map[string]uint64{}}
		sm.Runs = append(slices.Clip(sm.Runs), m.ID)
		sm.ActiveRun = m.ID
		out = cloneSession(*sm)
		return []protocol.Envelope{journal.SessionChangedRecord(m.SessionID)}, nil
	})
	return out, err
}

// updateSession applies fn to a copy of cur and keeps its changes to the
// runtime-owned fields (journal.SessionUpdater's rules).
func updateSession(cur *journal.SessionMeta, fn func(*journal.SessionMeta) error) error {
	next := cloneSession(*cur)
	if err := fn(&next); err != nil {
		return err
	}
	journal.RedactSession(&next)
	next = cloneSession(next)
	cur.Queue, cur.Goal, cur.RecentKeys, cur.Title = next.Queue, next.Goal, next.RecentKeys, next.Title
	return nil
}

// IdleQueues lists the sessions with queued messages and no active run;
// see journal.Queues.
func (s *Store) IdleQueues(ctx context.Context) ([]string, error) {
	var out []string
	err := s.read(ctx, func(d *data) error {
		for id, m := range d.sessions {
			if m.ActiveRun == "" && len(m.Queue) > 0 {
				out = append(out, id)
			}
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// DeleteSession removes a session without an active run and its runs; see
// journal.Registry.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	return s.write(ctx, func(d *data) ([]protocol.Envelope, error) {
		sm := d.sessions[id]
		switch {
		case sm == nil:
			return nil, fmt.Errorf("session %q: %w", id, journal.ErrNotFound)
		case sm.ActiveRun != "":
			return nil, fmt.Errorf("session %q has active run %q: %w", id, sm.ActiveRun, journal.ErrConflict)
		}
		for _, rid := range sm.Runs {
			delete(d.runs, rid)
		}
		delete(d.sessions, id)
		owned := slices.DeleteFunc(slices.Clone(d.owners[sm.Owner]), func(s string) bool { return s == id })
		if len(owned) == 0 {
			delete(d.owners, sm.Owner)
		} else {
			d.owners[sm.Owner] = owned
		}
		return []protocol.Envelope{journal.SessionChangedRecord(id)}, nil
	})
}

// ActiveRuns lists every run without a terminal event, by id; see
// journal.Registry.
func (s *Store) ActiveRuns(ctx context.Context) ([]journal.RunMeta, error) {
	out := []journal.RunMeta{}
	err := s.read(ctx, func(d *data) error {
		for _, r := range d.runs {
			if !r.meta.Terminal {
				out = append(out, r.meta)
			}
		}
		return nil
	})
	slices.SortFunc(out, func(a, b journal.RunMeta) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return out, err
}

// Trim deletes terminal runs that ended before before; see
// journal.Registry.
func (s *Store) Trim(ctx context.Context, before time.Time) (int, error) {
	cutoff := protocol.Timestamp(before)
	n := 0
	err := s.write(ctx, func(d *data) ([]protocol.Envelope, error) {
		for id, r := range d.runs {
			if !r.meta.Terminal || r.meta.TerminalAt >= cutoff {
				continue
			}
			delete(d.runs, id)
			if sm := d.sessions[r.meta.SessionID]; sm != nil {
				sm.Runs = slices.DeleteFunc(slices.Clone(sm.Runs), func(s string) bool { return s == id })
			}
			n++
		}
		return nil, nil
	})
	return n, err
}

// UpdateSession changes a session's runtime-owned state (queue, goal,
// recent keys, title) atomically; see journal.SessionUpdater.
func (s *Store) UpdateSession(ctx context.Context, id string, fn func(*journal.SessionMeta) error) (journal.SessionMeta, error) {
	var out journal.SessionMeta
	err := s.write(ctx, func(d *data) ([]protocol.Envelope, error) {
		cur := d.sessions[id]
		if cur == nil {
			return nil, fmt.Errorf("session %q: %w", id, journal.ErrNotFound)
		}
		if err := updateSession(cur, fn); err != nil {
			return nil, err
		}
		out = cloneSession(*cur)
		return []protocol.Envelope{journal.SessionChangedRecord(id)}, nil
	})
	return out, err
}

// SubscribeRun calls fn with every event appended to runID from now on;
// see journal.Bus.
func (s *Store) SubscribeRun(runID string, fn func(protocol.Envelope)) (cancel func()) {
	return s.bus.SubscribeRun(runID, fn)
}

// SubscribeFeed calls fn with every event of every run from now on; see
// journal.Bus.
func (s *Store) SubscribeFeed(fn func(protocol.Envelope)) (cancel func()) {
	return s.bus.SubscribeFeed(fn)
}

// SubscribeInterest subscribes fn to the whole feed (it is in process);
// see journal.Bus.
func (s *Store) SubscribeInterest(fn func(protocol.Envelope)) journal.Interest {
	return journal.WholeFeed{CancelFunc: s.bus.SubscribeFeed(fn)}
}

// cloneSession is a deep copy of m: no caller shares a slice or the goal
// with what the store holds.
func cloneSession(m journal.SessionMeta) journal.SessionMeta {
	m.Runs = slices.Clone(m.Runs)
	if m.Runs == nil {
		m.Runs = []string{}
	}
	m.Queue = slices.Clone(m.Queue)
	m.RecentKeys = slices.Clone(m.RecentKeys)
	if m.Goal != nil {
		g := *m.Goal
		m.Goal = &g
	}
	return m
}
