package journal

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/runhub/runhub/protocol"
)

// Sentinel errors; backends wrap them with %w.
var (
	ErrNotFound = errors.New("journal: not found")
	ErrConflict = errors.New("journal: conflict")
	ErrTerminal = errors.New("journal: run already has its terminal event")
	ErrExists   = errors.New("journal: already exists")
	ErrClosed   = errors.New("journal: closed")
)

// SessionMeta is a session's registry entry.
type SessionMeta struct {
	ID        string   `json:"id"`
	Owner     string   `json:"owner"`
	Title     string   `json:"title,omitempty"`
	CreatedAt float64  `json:"created_at"`
	Runs      []string `json:"runs"`                 // run ids, oldest first
	ActiveRun string   `json:"active_run,omitempty"` // the run without a terminal event, if any

	// Runtime-owned session state, changed only through UpdateSession: the
	// session's FIFO of queued messages, its standing goal, and the
	// idempotency keys of its most recent queue requests.
	Queue      []QueuedMessage              `json:"queue,omitempty"`
	Goal       *protocol.GoalUpdatedPayload `json:"goal,omitempty"`
	RecentKeys []string                     `json:"recent_keys,omitempty"`
}

// QueuedMessage is one message waiting in a session's FIFO for the next run.
type QueuedMessage struct {
	ID       string  `json:"id"`
	Message  string  `json:"message"`
	QueuedAt float64 `json:"queued_at"`
}

// SessionUpdater changes a session's runtime-owned state atomically: fn
// sees the current meta and may change Queue, Goal, RecentKeys and Title;
// changes to other fields are ignored. When fn returns an error nothing is
// written and that error is returned. fn may run more than once (optimistic
// backends retry on contention) and must not block.
type SessionUpdater interface {
	UpdateSession(ctx context.Context, id string, fn func(*SessionMeta) error) (SessionMeta, error)
}

// Queues is how a session's queued messages become runs without a crash
// losing or stranding one.
type Queues interface {
	// BeginRunUpdate is BeginRun and UpdateSession in one atomic step: when
	// the session has no active run, fn sees its meta (as UpdateSession's
	// fn does, same rules) and the run is registered together with fn's
	// changes; when fn returns an error nothing is written and that error is
	// returned. It answers BeginRun's errors otherwise (ErrConflict while
	// the session has an active run, then fn is not called). It returns the
	// session as written (the run registered as its active run). A queued
	// message becomes a run this way: its pop from the queue and the run's
	// registration cannot be split by a crash, and a registered run that
	// never started (no event) is completed by recovery.
	BeginRunUpdate(ctx context.Context, r RunMeta, fn func(*SessionMeta) error) (SessionMeta, error)
	// IdleQueues lists the sessions that have queued messages and no active
	// run (a crash between a run's end and the start of the next queued
	// message leaves one such), for recovery to drain. The list may be
	// stale by the time it is read; the caller re-checks.
	IdleQueues(ctx context.Context) ([]string, error)
}

// LatestRun returns the id of the session's newest run, or "".
func (s *SessionMeta) LatestRun() string {
	if len(s.Runs) == 0 {
		return ""
	}
	return s.Runs[len(s.Runs)-1]
}

// RunMeta is a run's registry entry.
type RunMeta struct {
	ID           string             `json:"id"`
	SessionID    string             `json:"session_id"`
	Owner        string             `json:"owner"`
	CreatedAt    float64            `json:"created_at"`
	Request      json.RawMessage    `json:"request,omitempty"` // the StartRunRequest, redacted
	LastSeq      uint64             `json:"last_seq"`
	Terminal     bool               `json:"terminal"`
	TerminalType protocol.EventType `json:"terminal_type,omitempty"`
	TerminalAt   float64            `json:"terminal_at,omitempty"`
}

// Log is the per-run append-only event log.
type Log interface {
	// Append journals e (Seq and EventID are assigned; CreatedAt is set when
	// zero) and returns the stored envelope. The run must have begun
	// (BeginRun). key, when not empty, makes the append idempotent: a retry
	// with the same key returns the event stored the first time.
	// Errors: ErrNotFound, ErrTerminal (with the existing terminal event
	// returned), *protocol.Error for invalid or oversized events.
	Append(ctx context.Context, e protocol.Envelope, key string) (protocol.Envelope, error)
	// Read returns up to limit events of the run with seq > afterSeq, in seq
	// order.
	Read(ctx context.Context, runID string, afterSeq uint64, limit int) ([]protocol.Envelope, error)
	// Run returns the run's meta.
	Run(ctx context.Context, runID string) (RunMeta, error)
}

// Registry is the session registry.
type Registry interface {
	// CreateSession registers a new session (ErrExists if the id is taken).
	CreateSession(ctx context.Context, s SessionMeta) error
	// Session returns a session's meta.
	Session(ctx context.Context, id string) (SessionMeta, error)
	// Sessions lists the sessions of an owner, oldest first.
	Sessions(ctx context.Context, owner string) ([]SessionMeta, error)
	// SessionsPage is a page of Sessions: at most limit sessions of owner,
	// in Sessions' order, those after the session after (from the first
	// when after is ""), and whether more follow. It reads no other
	// session's meta where the backend can (bbolt, memory). ErrNotFound
	// when after is not one of owner's sessions.
	SessionsPage(ctx context.Context, owner, after string, limit int) ([]SessionMeta, bool, error)
	// BeginRun registers a run as its session's newest and active run. It is
	// ErrConflict when the session already has an active run, ErrNotFound
	// when the session does not exist, ErrExists when the run id is taken.
	BeginRun(ctx context.Context, r RunMeta) error
	// DeleteSession removes a session with every run of it (metas, events,
	// idempotency keys) and announces the change on the feed
	// (SessionChanged; the session then reads as ErrNotFound). It is
	// ErrConflict while the session has an active run, decided atomically
	// with BeginRun, and ErrNotFound when the session does not exist.
	DeleteSession(ctx context.Context, id string) error
	// ActiveRuns lists every run without a terminal event.
	ActiveRuns(ctx context.Context) ([]RunMeta, error)
	// Trim deletes the events and meta of runs whose terminal event is older
	// than before; active runs are never trimmed. It returns how many runs it
	// trimmed.
	Trim(ctx context.Context, before time.Time) (int, error)
}

// Bus delivers new events to subscribers after they are durable.
type Bus interface {
	// SubscribeRun calls fn with every event appended to runID from now on,
	// in seq order. cancel stops delivery; after it returns fn is not called.
	SubscribeRun(runID string, fn func(protocol.Envelope)) (cancel func())
	// SubscribeFeed calls fn with every event of every session from now on,
	// in seq order per run. The payload of delta events (EventType.IsDelta)
	// may be omitted ("{}"): the feed is for status, not content; and a
	// feed may leave deltas out, putting a DeltasSkipped record for them
	// before the next record of their run.
	//
	// The feed also carries a record of type SessionChanged whenever a
	// session changes without an event (CreateSession, BeginRun,
	// UpdateSession), on every node sharing the journal.
	SubscribeFeed(fn func(protocol.Envelope)) (cancel func())
	// SubscribeInterest calls fn with the feed records (as SubscribeFeed
	// gives them) of the sessions the returned Interest names, and maybe
	// of others: a feed partitioned by interest (journal/redis) reads
	// only the partitions that hold them, so a subscriber with no
	// interest costs nothing; an in-process feed gives every record.
	SubscribeInterest(fn func(protocol.Envelope)) Interest
}

// Interest names the sessions whose feed records a SubscribeInterest
// subscriber needs. Its methods are safe for concurrent use; Watch,
// Unwatch, WatchAll and UnwatchAll never block (a caller may hold its own
// lock), Ready may wait for the journal.
type Interest interface {
	// Watch adds a session; each Watch needs its own Unwatch.
	Watch(sid string)
	// Unwatch removes one Watch of a session.
	Unwatch(sid string)
	// WatchAll adds every session (a watch of all an owner's sessions,
	// which may be in any partition); each needs its own UnwatchAll.
	WatchAll()
	// UnwatchAll removes one WatchAll.
	UnwatchAll()
	// Ready returns once the records of sid (watched) journaled from now
	// on will be delivered: a subscriber that then reads the session's
	// state from the journal and folds the records that follow misses
	// nothing. sid "" means every session (after WatchAll).
	Ready(ctx context.Context, sid string) error
	// Cancel ends the subscription; after it returns fn is not called.
	Cancel()
}

// WholeFeed is the Interest of a feed that delivers every record whatever
// the interest (an in-process feed): it names nothing and is always ready.
type WholeFeed struct{ CancelFunc func() }

// Watch does nothing: every record is delivered.
func (WholeFeed) Watch(string) {}

// Unwatch does nothing.
func (WholeFeed) Unwatch(string) {}

// WatchAll does nothing.
func (WholeFeed) WatchAll() {}

// UnwatchAll does nothing.
func (WholeFeed) UnwatchAll() {}

// Ready returns nil: the feed is read whole from the subscription on.
func (WholeFeed) Ready(context.Context, string) error { return nil }

// Cancel ends the subscription.
func (w WholeFeed) Cancel() { w.CancelFunc() }

// SessionChanged is the Type of a feed record that is no event: the
// session named by its SessionID was created, got a new run registered
// (still queued: no event yet), had its runtime-owned state (queue,
// goal, title) updated, or was deleted. It has no RunID, Seq or payload; a subscriber that
// shows session state re-reads the session. It never reaches a run's log
// or a client.
const SessionChanged protocol.EventType = "journal.session_changed"

// DeltasSkipped is the Type of a feed record that stands for delta events
// (EventType.IsDelta) a feed left out: a feed that coalesces deltas
// (journal/redis with a FeedInterval) puts at most one such record per
// interval per run, or one just before the next event it carries, rather
// than one record per delta. Its RunID, SessionID, Seq (the last left-out
// delta's), CreatedAt (that delta's) and its payload (SkippedDeltas) let
// a status fold (session.Session.Skip) reach the status that folding each
// delta would have reached. It never reaches a run's log or a client.
const DeltasSkipped protocol.EventType = "journal.deltas_skipped"

// SkippedDeltas is the payload of a DeltasSkipped record.
type SkippedDeltas struct {
	Count  int64              `json:"count"`          // deltas left out, seqs Seq-Count+1 … Seq
	Tokens int64              `json:"tokens"`         // how many of them were token.delta
	Last   protocol.EventType `json:"last,omitempty"` // the last that sets the progress: token.delta or reasoning.delta
}

// SessionChangedRecord is the feed record announcing a change of sid.
func SessionChangedRecord(sid string) protocol.Envelope {
	return protocol.Envelope{Type: SessionChanged, SessionID: sid}
}

// Store is a journal backend.
type Store interface {
	Log
	Registry
	SessionUpdater
	Queues
	Bus
	// Close stops delivery and releases the backend. Calls after Close
	// return ErrClosed.
	Close() error
}
