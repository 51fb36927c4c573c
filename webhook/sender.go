package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/runhub/runhub/internal/retry"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Outbox is what the sender needs of a journal backend's outbox (the
// methods of journal/bolt.Store and journal/redis.Store when their outbox
// is on): the notable events recorded with their append, and a place for
// the sender's state of each.
type Outbox interface {
	OutboxList(ctx context.Context, limit int) ([]journal.OutboxEntry, error)
	OutboxSave(ctx context.Context, id string, state []byte) error
	OutboxDelete(ctx context.Context, id string) error
}

// Journal is what the sender reads of the journal: the event an entry
// names, its run (for the opt-out) and its session.
type Journal interface {
	Read(ctx context.Context, runID string, afterSeq uint64, limit int) ([]protocol.Envelope, error)
	Run(ctx context.Context, runID string) (journal.RunMeta, error)
	Session(ctx context.Context, id string) (journal.SessionMeta, error)
}

// optedOut reports whether a run's start request says
// "metadata": {"webhooks": false}.
func optedOut(request json.RawMessage) bool {
	var r struct {
		Metadata struct {
			Webhooks *bool `json:"webhooks"`
		} `json:"metadata"`
	}
	return json.Unmarshal(request, &r) == nil && r.Metadata.Webhooks != nil && !*r.Metadata.Webhooks
}

// Leader says whether this process is the one that sends (with several
// replicas on Redis: the holder of a claim, RedisLeader). Nil: always.
type Leader interface {
	Leading() bool
}

// Retry is the retry schedule of one notification to one endpoint: the
// n-th failed attempt waits Min·2^(n-1), at most Max, less a random part
// of up to Jitter of it; after GiveUp since the first attempt the
// notification is given up (counted, logged).
type Retry struct {
	Min, Max, GiveUp time.Duration
	Jitter           float64 // 0..1, default 0.5
}

// DefaultRetry is 5s, 10s, 20s … 1h, for 24h.
var DefaultRetry = Retry{Min: 5 * time.Second, Max: time.Hour, GiveUp: 24 * time.Hour, Jitter: 0.5}

// delay is the wait after the n-th failed attempt (n ≥ 1).
func (r Retry) delay(n int, rnd func() float64) time.Duration {
	return retry.Backoff{Min: r.Min, Max: r.Max, Jitter: r.Jitter}.Delay(n, rnd())
}

// Options configure a Sender.
type Options struct {
	Endpoints []Endpoint // validated (Config.Endpoints)
	Outbox    Outbox
	Journal   Journal
	// Wake, when set, is subscribed to: a call of the func it is given
	// says a notable event was just journaled (the journal's feed), so the
	// sender looks at once instead of at the next Poll.
	Wake   func(fn func(protocol.Envelope)) (cancel func())
	Leader Leader
	Retry  Retry
	// Timeout bounds one attempt (connect, send, the status line). Default 10s.
	Timeout time.Duration
	// Poll is how often the outbox is read without a wake-up. Default 1s.
	Poll time.Duration
	// Concurrency bounds the attempts in flight per endpoint. Default 4.
	Concurrency int
	// MaxPending bounds the notifications held in memory; more wait in the
	// outbox. Default 1000.
	MaxPending int
	// History is how many recent attempts Deliveries keeps. Default 500.
	History int
	// PublicURL is the workbench's base URL for the link in data.url.
	PublicURL string
	// Client sends the requests. Default: a client that follows no
	// redirects and uses Timeout.
	Client  *http.Client
	Logger  *slog.Logger
	Metrics *Metrics
	Now     func() time.Time
}

func (o *Options) setDefaults() {
	if o.Retry.Min <= 0 {
		o.Retry.Min = DefaultRetry.Min
	}
	if o.Retry.Max < o.Retry.Min {
		o.Retry.Max = max(DefaultRetry.Max, o.Retry.Min)
	}
	if o.Retry.GiveUp <= 0 {
		o.Retry.GiveUp = DefaultRetry.GiveUp
	}
	if o.Retry.Jitter <= 0 || o.Retry.Jitter > 1 {
		o.Retry.Jitter = DefaultRetry.Jitter
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 1000
	}
	if o.History <= 0 {
		o.History = 500
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone() // the sender's own pool
		tr.MaxIdleConnsPerHost = o.Concurrency
		o.Client = &http.Client{
			Transport: tr,
			Timeout:   o.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse // a redirect is an answer, not a delivery
			},
		}
	}
}

// saveTimeout bounds one OutboxSave.
const saveTimeout = 5 * time.Second

// Outcomes of a notification at one endpoint (state "done"), and of one
// attempt in the deliveries view.
const (
	Delivered = "delivered" // a 2xx answer
	Failed    = "failed"    // an attempt that will be retried
	GaveUp    = "gave_up"   // Retry.GiveUp passed
	Disabled  = "disabled"  // the endpoint answered 410 Gone
	Dropped   = "dropped"   // the event is gone (session deleted, run trimmed) or unreadable
	Skipped   = "skipped"   // the run opted out ("metadata": {"webhooks": false})
)

// entryState is the sender's state of one outbox entry, saved in the
// outbox after every attempt.
type entryState struct {
	First int64               `json:"first,omitempty"` // unix ms of the first attempt
	Ep    map[string]*epState `json:"ep,omitempty"`
}

type epState struct {
	N    int    `json:"n,omitempty"`    // attempts made
	Next int64  `json:"next,omitempty"` // unix ms before which no attempt is made
	Done string `json:"done,omitempty"` // Delivered, GaveUp, Disabled, Dropped
}

// item is an outbox entry the sender is working on.
type item struct {
	entry    journal.OutboxEntry
	st       entryState
	body     []byte // built once
	msgID    string
	typ      string
	inflight map[string]bool // endpoint names with an attempt under way
}

// Delivery is one attempt, as GET /v1/webhooks/deliveries shows it.
type Delivery struct {
	ID         string  `json:"id"` // the webhook-id
	Endpoint   string  `json:"endpoint"`
	Type       string  `json:"type"`
	SessionID  string  `json:"session_id"`
	RunID      string  `json:"run_id"`
	Attempt    int     `json:"attempt"`
	Status     string  `json:"status"` // delivered, failed, gave_up, disabled
	HTTPStatus int     `json:"http_status,omitempty"`
	Error      string  `json:"error,omitempty"`
	At         float64 `json:"at"`
	DurationMS float64 `json:"duration_ms"`
	NextAt     float64 `json:"next_at,omitempty"` // failed: when the next attempt is due
}

// Sender delivers the outbox's notifications. Start it with Start, stop it
// with Stop; it owns its goroutines. Delivery happens on them only: a slow
// or dead receiver holds no run and no socket.
type Sender struct {
	o    Options
	eps  []*endpoint
	wake chan struct{}

	listFailing bool // the last OutboxList failed (the loop's own)

	saveMu  sync.Mutex // serializes OutboxSave
	mu      sync.Mutex
	items   map[string]*item
	tombs   map[string]int // entries done with, being deleted (-1) or deleted as of list n
	lists   int            // OutboxList calls begun
	history []Delivery     // ring, newest at (next-1)
	next    int

	ctx      context.Context
	cancel   context.CancelFunc
	stopOnce sync.Once
	wg       sync.WaitGroup
	unsub    func()
}

type endpoint struct {
	Endpoint
	host     string // scheme://host/path, for logs (no query, no user info)
	inflight int    // under Sender.mu
	disabled bool   // under Sender.mu
}

// New makes a Sender; Start starts it.
func New(o Options) (*Sender, error) {
	o.setDefaults()
	if o.Outbox == nil || o.Journal == nil {
		return nil, errors.New("webhook: a sender needs an outbox and a journal")
	}
	s := &Sender{o: o, wake: make(chan struct{}, 1), items: map[string]*item{}, tombs: map[string]int{}}
	for _, e := range o.Endpoints {
		if e.key == nil {
			key, err := ParseSecret(e.Secret)
			if err != nil {
				return nil, fmt.Errorf("webhook: endpoint %s: secret: %v", e.Name, err)
			}
			e.key = key
		}
		if err := checkURL(e.URL); err != nil {
			return nil, fmt.Errorf("webhook: endpoint %s: %v", e.Name, err)
		}
		if len(e.Events) == 0 {
			e.Events = DefaultTypes
		}
		u, _ := url.Parse(e.URL)
		s.eps = append(s.eps, &endpoint{Endpoint: e, host: u.Scheme + "://" + u.Host + u.Path})
	}
	s.history = make([]Delivery, 0, o.History)
	o.Metrics.queue(s.Pending)
	return s, nil
}

// Start starts the sender's loop.
func (s *Sender) Start() {
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if s.o.Wake != nil {
		s.unsub = s.o.Wake(func(e protocol.Envelope) {
			if journal.Notable(&e) {
				s.poke()
			}
		})
	}
	s.wg.Add(1)
	go s.loop()
}

// Stop stops the loop and waits for the attempts under way (each bounded
// by Timeout). What was not delivered stays in the outbox.
func (s *Sender) Stop() {
	s.stopOnce.Do(func() {
		if s.cancel == nil {
			return
		}
		if s.unsub != nil {
			s.unsub()
		}
		s.cancel()
		s.wg.Wait()
		s.o.Client.CloseIdleConnections()
	})
}

func (s *Sender) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Pending is how many notifications the sender holds, not yet done.
func (s *Sender) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.items)
}

func (s *Sender) loop() {
	defer s.wg.Done()
	t := time.NewTicker(s.o.Poll)
	defer t.Stop()
	for {
		s.scan()
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		case <-s.wake:
		}
	}
}

func (s *Sender) isLeading() bool { return s.o.Leader == nil || s.o.Leader.Leading() }

// scan reads the outbox and starts the attempts that are due.
func (s *Sender) scan() {
	ctx := s.ctx
	if !s.isLeading() {
		// Not (or no longer) the sender: forget what is not in flight; the
		// holder of the claim works from the outbox.
		s.mu.Lock()
		for id, it := range s.items {
			if len(it.inflight) == 0 {
				delete(s.items, id)
			}
		}
		s.mu.Unlock()
		return
	}
	s.mu.Lock()
	s.lists++
	list := s.lists
	s.mu.Unlock()
	entries, err := s.o.Outbox.OutboxList(ctx, s.o.MaxPending)
	if err != nil {
		if ctx.Err() == nil && !s.listFailing { // once per outage, not once per poll
			s.o.Logger.Warn("webhook: reading the outbox", "err", err)
		}
		s.listFailing = true
		return
	}
	if s.listFailing {
		s.listFailing = false
		s.o.Logger.Info("webhook: reading the outbox again")
	}
	seen := make(map[string]bool, len(entries))
	for _, en := range entries {
		seen[en.ID] = true
		s.mu.Lock()
		_, known := s.items[en.ID]
		_, deleted := s.tombs[en.ID]
		s.mu.Unlock()
		if known || deleted {
			continue
		}
		it := s.load(ctx, en)
		if it == nil {
			continue
		}
		s.mu.Lock()
		s.items[en.ID] = it
		s.mu.Unlock()
	}
	now := s.o.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, at := range s.tombs {
		if at >= 0 && at < list { // deleted before this list was read: not in it
			delete(s.tombs, id)
		}
	}
	for id, it := range s.items {
		if !seen[id] && len(it.inflight) == 0 {
			delete(s.items, id) // deleted meanwhile (by an earlier holder of the claim)
			continue
		}
		s.dispatch(it, now)
	}
}

// load reads an entry's event and session and builds its notification;
// an entry whose event is gone is dropped (nil).
func (s *Sender) load(ctx context.Context, en journal.OutboxEntry) *item {
	it := &item{entry: en, msgID: messageID(en.RunID, en.Seq), typ: typeOf(en.Type, false), inflight: map[string]bool{}}
	if len(en.State) > 0 {
		if err := json.Unmarshal(en.State, &it.st); err != nil {
			s.o.Logger.Warn("webhook: unreadable outbox state, starting over", "entry", en.ID, "err", err)
			it.st = entryState{}
		}
	}
	if it.st.Ep == nil {
		it.st.Ep = map[string]*epState{}
	}
	evs, err := s.o.Journal.Read(ctx, en.RunID, en.Seq-1, 1)
	if err != nil && !errors.Is(err, journal.ErrNotFound) {
		if ctx.Err() == nil {
			s.o.Logger.Warn("webhook: reading an event of the outbox", "run_id", en.RunID, "seq", en.Seq, "err", err)
		}
		return nil // try again at the next scan
	}
	if len(evs) == 0 || evs[0].Seq != en.Seq {
		s.drop(ctx, it, "the event is gone")
		return nil
	}
	e := evs[0]
	run, err := s.o.Journal.Run(ctx, en.RunID)
	if err != nil && !errors.Is(err, journal.ErrNotFound) {
		return nil
	}
	if optedOut(run.Request) {
		s.skip(ctx, it)
		return nil
	}
	sess, err := s.o.Journal.Session(ctx, e.SessionID)
	if err != nil && !errors.Is(err, journal.ErrNotFound) {
		return nil
	}
	summary := ""
	if e.Terminal && e.Seq > 1 {
		// The run's last message, from at most summaryWindow events before its end.
		from := e.Seq - 1 - min(e.Seq-1, summaryWindow)
		if evs, err := s.o.Journal.Read(ctx, en.RunID, from, summaryWindow); err == nil {
			summary = lastMessage(evs)
		}
	}
	body, typ, err := build(&e, sess, s.o.PublicURL, summary)
	if err == nil && len(body) > MaxBody {
		err = fmt.Errorf("body of %d bytes over %d", len(body), MaxBody)
	}
	if err != nil {
		s.drop(ctx, it, err.Error())
		return nil
	}
	it.body, it.typ = body, typ
	return it
}

// skip removes the entry of a run that opted out.
func (s *Sender) skip(ctx context.Context, it *item) {
	s.o.Logger.Debug("webhook: the run opted out", "run_id", it.entry.RunID, "seq", it.entry.Seq)
	s.o.Metrics.outcome(Skipped)
	if err := s.o.Outbox.OutboxDelete(ctx, it.entry.ID); err != nil && ctx.Err() == nil {
		s.o.Logger.Warn("webhook: deleting an outbox entry", "err", err)
	}
}

// drop removes an entry that cannot be sent.
func (s *Sender) drop(ctx context.Context, it *item, why string) {
	s.o.Logger.Info("webhook: notification dropped", "run_id", it.entry.RunID, "seq", it.entry.Seq, "reason", why)
	s.o.Metrics.outcome(Dropped)
	if err := s.o.Outbox.OutboxDelete(ctx, it.entry.ID); err != nil && ctx.Err() == nil {
		s.o.Logger.Warn("webhook: deleting an outbox entry", "err", err)
	}
}
