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
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// The documents: one per subscription, and the index of them all (their
// owners, patterns and explicit streams, to match appends against).
const (
	docPrefix = "__ds/subscriptions/"
	indexDoc  = "__ds/index"
)

// indexEntry is a subscription as appends are matched against it.
type indexEntry struct {
	Owner   string   `json:"owner"`
	Pattern string   `json:"pattern,omitempty"`
	Streams []string `json:"streams,omitempty"`
	At      int64    `json:"at"` // unix ms of its registration
}

type index struct {
	Subs map[string]indexEntry `json:"subs"`
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

// loadIndex returns the index, read again when it changed.
func (m *Manager) loadIndex(ctx context.Context, force bool) (index, error) {
	m.idxMu.Lock()
	defer m.idxMu.Unlock()
	if !m.idxStale && !force {
		return m.idx, nil
	}
	m.idxStale = false
	idx, _, err := m.readIndex(ctx)
	if err != nil {
		m.idxStale = true
		return m.idx, err
	}
	m.idx = idx
	return idx, nil
}

func (m *Manager) readIndex(ctx context.Context) (index, uint64, error) {
	raw, ver, err := m.o.Docs.LoadDoc(ctx, indexDoc)
	if errors.Is(err, journal.ErrNotFound) {
		return index{Subs: map[string]indexEntry{}}, 0, nil
	}
	if err != nil {
		return index{}, 0, err
	}
	var idx index
	if err := json.Unmarshal(raw, &idx); err != nil {
		return index{}, 0, err
	}
	if idx.Subs == nil {
		idx.Subs = map[string]indexEntry{}
	}
	return idx, ver, nil
}

// changeIndex applies fn to the index by compare-and-set.
func (m *Manager) changeIndex(ctx context.Context, fn func(idx *index) (bool, *Error)) error {
	for range 64 {
		idx, ver, err := m.readIndex(ctx)
		if err != nil {
			return err
		}
		changed, e := fn(&idx)
		if e != nil {
			return e
		}
		if !changed {
			return nil
		}
		raw, _ := json.Marshal(idx)
		if _, err := m.o.Docs.PutDoc(ctx, indexDoc, ver, raw); errors.Is(err, journal.ErrConflict) {
			continue
		} else if err != nil {
			return err
		}
		m.idxMu.Lock()
		m.idxStale = true
		m.idxMu.Unlock()
		return nil
	}
	return errf(http.StatusServiceUnavailable, CodeUnavailable, "the subscription index is too busy; retry")
}

// match wakes the subscriptions an append concerns: those of the
// stream's owner whose pattern matches it or that list it.
func (m *Manager) match(ctx context.Context, name string, n note) {
	idx, err := m.loadIndex(ctx, false)
	if err != nil {
		m.o.Logger.Warn("subscriptions: the index could not be read; the sweep will catch up", "err", err)
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

// kick starts the delivery of s's wake when it is due.
func (m *Manager) kick(s *sub) {
	if s.WakeID == "" || s.Delivered || s.Due == 0 || s.Due > m.now().UnixMilli() || m.ctx.Err() != nil {
		return
	}
	m.inMu.Lock()
	if m.inflight[s.ID] || len(m.inflight) >= maxInflight {
		m.inMu.Unlock()
		return // under way here, or too many: the sweep starts it later
	}
	m.inflight[s.ID] = true
	m.inMu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		last := m.deliver(s.ID)
		m.inMu.Lock()
		delete(m.inflight, s.ID)
		m.inMu.Unlock()
		if last != nil {
			m.kick(last) // the next wake ({"done": true} with more work), due at once
		}
	}()
}

// attempt is one delivery attempt of a wake, taken by this replica.
type attempt struct {
	typ, wakeID, url, wakeStream, owner string
	gen                                 uint64
	body                                []byte
}

// deliver makes one attempt at delivering subscription id's wake: it
// takes the attempt (so no other replica makes it before its deadline),
// makes it, and records how it went. It returns the state it left.
func (m *Manager) deliver(id string) *sub {
	ctx := m.ctx
	k, err := m.keyring(ctx)
	if err != nil {
		return nil
	}
	var a *attempt
	_, _, err = m.update(ctx, id, func(s *sub, tails map[string]tail) (bool, *Error) {
		a = nil
		now := m.now()
		changed := m.settle(s, tails)
		if s.WakeID == "" || s.Delivered || s.Due == 0 || s.Due > now.UnixMilli() {
			return changed, nil
		}
		s.Due = now.Add(2*m.o.WebhookTimeout + time.Second).UnixMilli()
		s.Attempts++
		a = &attempt{typ: s.Config.Type, wakeID: s.WakeID, gen: s.Gen, url: s.Config.WebhookURL, wakeStream: s.Config.WakeStream, owner: s.Owner}
		if a.typ == TypeWebhook {
			a.body = m.notification(s)
		} else {
			a.body, _ = json.Marshal(struct {
				Type           string `json:"type"`
				SubscriptionID string `json:"subscription_id"`
				Stream         string `json:"stream"`
				Generation     uint64 `json:"generation"`
				WakeID         string `json:"wake_id"`
				TS             int64  `json:"ts"`
			}{"wake", s.ID, s.Trigger, s.Gen, s.WakeID, now.UnixMilli()})
		}
		return true, nil
	})
	if err != nil || a == nil {
		return nil
	}
	var done bool
	if a.typ == TypeWebhook {
		done, err = m.post(ctx, k, a)
	} else {
		err = m.writeWake(ctx, a)
	}
	if ctx.Err() != nil {
		return nil // stopping: the attempt's deadline lets another replica (or the next start) retry
	}
	last, _, uerr := m.update(ctx, id, func(s *sub, tails map[string]tail) (bool, *Error) {
		if s.WakeID != a.wakeID || s.Gen != a.gen {
			return false, nil // superseded: the lease lapsed meanwhile
		}
		now := m.now()
		if err != nil {
			s.Status = "failed"
			s.Due = now.Add(retryDelay(s.Attempts)).UnixMilli()
			return true, nil
		}
		s.Delivered, s.Status, s.Attempts, s.Due = true, "active", 0, 0
		if s.Config.Type == TypeWebhook {
			s.LeaseUntil = now.UnixMilli() + s.Config.LeaseTTLms
		}
		if done { // {"done": true}: the snapshot is acked, the wake over
			for p, t := range s.Snapshot {
				if l := s.Links[p]; l != nil && t > l.Acked {
					l.Acked = t
				}
			}
			s.clearWake()
			m.settle(s, tails)
		}
		return true, nil
	})
	if err != nil {
		m.o.Logger.Warn("subscriptions: a delivery failed; it will be retried", "subscription", id, "wake", a.wakeID, "err", err)
	}
	if uerr != nil && !isNotFound(uerr) {
		m.o.Logger.Warn("subscriptions: a delivery's outcome was not recorded; it will be made again", "subscription", id, "err", uerr)
	}
	return last
}

// notification is a webhook wake's body.
func (m *Manager) notification(s *sub) []byte {
	infos := make([]streamInfo, 0, len(s.Links))
	for _, p := range s.paths() {
		l := s.Links[p]
		t, ok := s.Snapshot[p]
		if !ok {
			t = l.Acked
		}
		infos = append(infos, streamInfo{Path: p, LinkType: l.kind(), Acked: l.Acked, TailOffset: t, HasPending: t > l.Acked})
	}
	raw, _ := json.Marshal(struct {
		SubscriptionID string       `json:"subscription_id"`
		WakeID         string       `json:"wake_id"`
		Generation     uint64       `json:"generation"`
		Streams        []streamInfo `json:"streams"`
		CallbackURL    string       `json:"callback_url"`
		CallbackToken  string       `json:"callback_token"`
	}{s.ID, s.WakeID, s.Gen, infos, actionURL(s.Base, s.ID, "callback"), s.Token})
	return raw
}

// maxWebhookAnswer bounds what is read of a webhook's answer.
const maxWebhookAnswer = 64 << 10

// post makes a webhook POST, signed; done is the answer's {"done": true}.
func (m *Manager) post(ctx context.Context, k *keyring, a *attempt) (done bool, err error) {
	u, _ := urlHost(a.url)
	ctx = context.WithValue(ctx, devKey{}, isDevHost(u))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, strings.NewReader(string(a.body)))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Webhook-Signature", k.sign(a.body, m.now()))
	res, err := m.client.Do(req)
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	raw := make([]byte, 0, 256)
	buf := make([]byte, 4096)
	for len(raw) < maxWebhookAnswer {
		n, rerr := res.Body.Read(buf)
		raw = append(raw, buf[:n]...)
		if rerr != nil {
			break
		}
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return false, errors.New("the webhook answered " + res.Status)
	}
	var ans struct {
		Done bool `json:"done"`
	}
	_ = json.Unmarshal(raw, &ans)
	return ans.Done, nil
}

// writeWake appends a pull-wake's event to its wake stream (which must
// exist, be the subscription owner's, and be created by the application).
func (m *Manager) writeWake(ctx context.Context, a *attempt) error {
	info, err := m.o.Streams.StreamHead(ctx, a.wakeStream)
	if err != nil {
		return err
	}
	if info.Meta.Owner != a.owner {
		return errors.New("the wake stream is someone else's")
	}
	app := journal.StreamAppend{ContentType: info.Meta.ContentType, Data: a.body}
	if journal.MediaType(info.Meta.ContentType) == "application/json" {
		app.Count = 1
	} else {
		app.Data = append(app.Data, '\n')
	}
	_, err = m.o.Streams.AppendStream(ctx, a.wakeStream, app)
	return err
}

func (m *Manager) sweeper() {
	defer m.wg.Done()
	t := time.NewTicker(m.o.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		m.sweep(m.ctx)
	}
}

// orphanAfter is how old an index entry without its document must be
// before the sweep removes it (a registration may be between the two).
const orphanAfter = time.Minute

// sweep checks every subscription: a lapsed lease ended, a wake issued
// for work none covers, a due delivery started; an index entry whose
// subscription is gone removed.
func (m *Manager) sweep(ctx context.Context) {
	idx, err := m.loadIndex(ctx, true)
	if err != nil {
		return
	}
	var orphans []string
	for id, e := range idx.Subs {
		if ctx.Err() != nil {
			return
		}
		_, _, err := m.update(ctx, id, func(s *sub, tails map[string]tail) (bool, *Error) {
			return m.settle(s, tails), nil
		})
		if isNotFound(err) && m.now().Sub(time.UnixMilli(e.At)) > orphanAfter {
			orphans = append(orphans, id)
		}
	}
	if len(orphans) > 0 {
		_ = m.changeIndex(ctx, func(idx *index) (bool, *Error) {
			for _, id := range orphans {
				delete(idx.Subs, id)
			}
			return true, nil
		})
	}
}
