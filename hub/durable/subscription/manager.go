// Package subscription is the Durable Streams edge's subscriptions: the
// protocol's reserved subscription APIs (under {stream root}/__ds/) that
// map a glob pattern or explicit streams to a consumer, keep the
// consumer's cursor in every stream, and wake it when a linked stream has
// events after its cursor, by a signed webhook POST or by an event
// appended to a wake stream (pull-wake: claim, ack, release under a
// lease, fenced by generation). docs/durable-streams.md describes it.
//
// Every subscription's state is a document of the journal (journal.Docs),
// changed only by compare-and-set: whichever replica appended to a
// stream, claimed, acked or found a lease lapsed decides the change, and
// exactly one replica wins each (so exactly one delivers each wake). A
// wake is recorded before it is delivered and marked delivered after: a
// replica that dies in between leaves it due, and another delivers it
// again, with the same wake id, once the attempt's deadline passes.
package subscription

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/runhub/runhub/journal"
)

// Streams is what subscriptions need of the journal's streams: their
// tails, and appends to wake streams.
type Streams interface {
	StreamHead(ctx context.Context, name string) (journal.StreamInfo, error)
	AppendStream(ctx context.Context, name string, a journal.StreamAppend) (journal.StreamAppendResult, error)
}

// Options configure the subscriptions. Zero values take the defaults.
type Options struct {
	Docs    journal.Docs
	Streams Streams
	// MaxPerOwner bounds the subscriptions of one subject (default 100).
	MaxPerOwner int
	// MaxStreams bounds the streams linked to one subscription, explicit
	// and matched (default 1000).
	MaxStreams int
	// MaxTotal bounds the subscriptions of the whole journal (default
	// 10,000).
	MaxTotal int
	// SweepInterval is how often every subscription is checked for a
	// lapsed lease, a due (re)delivery and work no wake covers (default
	// 1 s).
	SweepInterval time.Duration
	// WebhookTimeout bounds one webhook POST (default 10 s).
	WebhookTimeout time.Duration
	// IndexMaxAge is how long a replica matches appends against its
	// cached copy of the subscription index without reading it again,
	// announced change or not (default 100 ms); a registration is
	// answered this long after the index records it, so that an append
	// that begins after the answer, on any replica, sees it.
	IndexMaxAge time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger gets the failed deliveries (default: none).
	Logger *slog.Logger
}

func (o *Options) setDefaults() {
	if o.MaxPerOwner <= 0 {
		o.MaxPerOwner = 100
	}
	if o.MaxStreams <= 0 {
		o.MaxStreams = 1000
	}
	if o.MaxTotal <= 0 {
		o.MaxTotal = 10000
	}
	if o.SweepInterval <= 0 {
		o.SweepInterval = time.Second
	}
	if o.WebhookTimeout <= 0 {
		o.WebhookTimeout = 10 * time.Second
	}
	if o.IndexMaxAge <= 0 {
		o.IndexMaxAge = 100 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// note is an append a subscription may have to wake for.
type note struct {
	owner, gen string
	before     string // the stream's tail before the append
}

// maxInflight bounds the deliveries under way in this process.
const maxInflight = 64

// Manager is the subscriptions of one edge. Start starts its sweeper;
// Close ends it and waits for it and every delivery.
type Manager struct {
	o      Options
	client *http.Client

	keysMu sync.Mutex
	keys   *keyring

	idxMu    sync.Mutex
	idx      index
	idxStale bool
	idxRead  time.Time // when the read of idx began (monotonic)
	unwatch  func()

	inMu     sync.Mutex
	inflight map[string]bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns the subscriptions kept in o.Docs.
func New(o Options) *Manager {
	o.setDefaults()
	return &Manager{o: o, client: newClient(o.WebhookTimeout), idxStale: true, inflight: map[string]bool{}}
}

// Start starts the sweeper, until ctx ends or Close.
func (m *Manager) Start(parent context.Context) {
	m.ctx, m.cancel = context.WithCancel(parent)
	m.unwatch = m.o.Docs.WatchDoc(indexDoc, func() {
		m.idxMu.Lock()
		m.idxStale = true
		m.idxMu.Unlock()
	})
	m.wg.Add(1)
	go m.sweeper()
}

// Close stops the sweeper and the deliveries and waits for them.
func (m *Manager) Close() {
	if m.cancel == nil {
		return
	}
	m.cancel()
	m.unwatch()
	m.wg.Wait()
	m.client.CloseIdleConnections()
}

func (m *Manager) now() time.Time { return m.o.Now() }

// keyring loads the shared keys once.
func (m *Manager) keyring(ctx context.Context) (*keyring, error) {
	m.keysMu.Lock()
	defer m.keysMu.Unlock()
	if m.keys != nil {
		return m.keys, nil
	}
	k, err := loadKeys(ctx, m.o.Docs)
	if err != nil {
		return nil, err
	}
	m.keys = k
	return k, nil
}

// Appended links name (owned by owner, of incarnation gen), just
// appended to or created, to the subscriptions whose pattern matches it
// and wakes those with work, before the append is answered (a claim made
// after the answer finds the work; a wake's delivery runs on its own).
// before is the stream's tail before the append ("" when unknown: a
// producer's duplicate; a stream not linked yet is then linked at its
// start, so that nothing is missed).
func (m *Manager) Appended(ctx context.Context, name, owner, gen, before string) {
	if strings.HasPrefix(name, "__ds/") || m.ctx == nil {
		return
	}
	if before == "" {
		before = zeroOffset
	}
	// The append is in: its link is made even if its client goes away.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	m.match(ctx, name, note{owner: owner, gen: gen, before: before})
}

// match links the appended stream name to every subscription of the
// stream's owner whose pattern matches it or that list it.
func (m *Manager) match(ctx context.Context, name string, n note) {
	idx, err := m.loadIndex(ctx, false)
	if err != nil {
		// The sweep settles existing links only; it links no new glob
		// stream. So an append matched against an index that could not be
		// read may miss a subscription registered since (say so, loudly).
		m.o.Logger.Error("subscriptions: the index could not be read; a glob subscription registered since the last read misses this stream until its next append", "stream", name, "err", err)
	}
	for id, e := range idx.Subs {
		if e.Owner != n.owner {
			continue
		}
		glob := e.Pattern != "" && Match(e.Pattern, name)
		explicit := false
		for _, s := range e.Streams {
			if s == name {
				explicit = true
				break
			}
		}
		if !glob && !explicit {
			continue
		}
		_, _, err := m.update(ctx, id, func(s *sub, tails map[string]tail) (bool, *Error) {
			changed := false
			l := s.Links[name]
			if l == nil {
				if len(s.Links) >= m.o.MaxStreams {
					m.o.Logger.Warn("subscriptions: a subscription links as many streams as it may", "subscription", id, "stream", name)
					return false, nil
				}
				l = &link{Acked: n.before, Gen: n.gen}
				s.Links[name] = l
				t, err := m.tail(ctx, s.Owner, name)
				if err != nil {
					return false, errf(http.StatusServiceUnavailable, CodeUnavailable, "%v", err)
				}
				tails[name] = t
				changed = true
			}
			if glob && !l.Glob && Match(s.Config.Pattern, name) {
				l.Glob, changed = true, true
			}
			return m.settle(s, tails) || changed, nil
		})
		if err != nil && !isNotFound(err) {
			m.o.Logger.Warn("subscriptions: an append's wake failed; the sweep will retry", "subscription", id, "err", err)
		}
	}
}

func isNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeNotFound
}

// settle brings a subscription up to date at now: its cursors with the
// streams, a lapsed lease ended, a wake issued for pending work. It
// reports whether anything changed.
func (m *Manager) settle(s *sub, tails map[string]tail) bool {
	before, _ := json.Marshal(s)
	s.sync(tails)
	now := m.now()
	s.lapse(now)
	if k, err := m.keyring(m.ctx); err == nil {
		s.wake(tails, k, now)
	}
	after, _ := json.Marshal(s)
	return string(before) != string(after)
}

// tail is a stream's tail as the subscription of owner sees it.
func (m *Manager) tail(ctx context.Context, owner, name string) (tail, error) {
	info, err := m.o.Streams.StreamHead(ctx, name)
	var se *journal.StreamError
	if errors.As(err, &se) && (se.Kind == journal.StreamNotFound || se.Kind == journal.StreamGone) || errors.Is(err, journal.ErrNotFound) {
		return tail{}, nil
	}
	if err != nil {
		return tail{}, err
	}
	if info.Meta.Owner != owner {
		return tail{}, nil
	}
	return tail{ok: true, offset: FormatOffset(info.Meta.Records, info.Meta.Bytes), gen: info.Meta.Gen}, nil
}

// update changes subscription id by compare-and-set: fn gets its state and
// its streams' tails and says whether it changed it (or refuses). It
// returns the state and tails it left; a wake left due is delivered.
func (m *Manager) update(ctx context.Context, id string, fn func(s *sub, tails map[string]tail) (bool, *Error)) (*sub, map[string]tail, error) {
	for range 64 {
		s, ver, err := m.load(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		tails := make(map[string]tail, len(s.Links))
		for p := range s.Links {
			t, err := m.tail(ctx, s.Owner, p)
			if err != nil {
				return nil, nil, err
			}
			tails[p] = t
		}
		changed, e := fn(s, tails)
		if e != nil {
			return s, tails, e
		}
		if changed {
			raw, _ := json.Marshal(s)
			if _, err := m.o.Docs.PutDoc(ctx, docPrefix+id, ver, raw); errors.Is(err, journal.ErrConflict) {
				continue
			} else if err != nil {
				return nil, nil, err
			}
		}
		m.kick(s)
		return s, tails, nil
	}
	return nil, nil, errf(http.StatusServiceUnavailable, CodeUnavailable, "the subscription is too busy; retry")
}

func (m *Manager) load(ctx context.Context, id string) (*sub, uint64, error) {
	raw, ver, err := m.o.Docs.LoadDoc(ctx, docPrefix+id)
	if errors.Is(err, journal.ErrNotFound) {
		return nil, 0, notFound()
	}
	if err != nil {
		return nil, 0, err
	}
	var s sub
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, 0, err
	}
	if s.Links == nil {
		s.Links = map[string]*link{}
	}
	return &s, ver, nil
}
