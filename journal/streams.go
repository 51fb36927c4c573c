package journal

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Durable streams (the Durable Streams protocol's append-only streams, served
// by hub/durable) live in the journal beside runs. A backend stores them
// through the few primitives of StreamStore (a compare-and-set of a stream's
// meta together with the records it appends); NewStreams builds the whole
// Streams contract over them, so that every rule (producers, closing,
// forks, expiry) is decided in one place and is atomic with the append on
// every backend.

// Streams is what the Durable Streams edge uses.
type Streams interface {
	// CreateStream creates the stream name as c says, or finds it: created
	// is false when a stream with the same configuration exists (it is
	// returned unchanged); a stream with another configuration is a
	// *StreamError of kind StreamConfigConflict.
	CreateStream(ctx context.Context, name string, c StreamCreate) (info StreamInfo, created bool, err error)
	// AppendStream appends a's records (and/or closes the stream), checking
	// the producer, the writer sequence, the content type, the closed flag
	// and the size bound atomically with the append. Once it has answered,
	// nothing refers to a.Data any more (the caller may reuse it), unless
	// the answer is a context error: the write may then still be queued
	// with it. CreateStream keeps to the same rule for c.Initial's data.
	AppendStream(ctx context.Context, name string, a StreamAppend) (StreamAppendResult, error)
	// ReadStream returns the records after the record index after, at most
	// maxBytes of data (at least one record when there is one). touch
	// slides the stream's TTL (a read that counts as an access).
	ReadStream(ctx context.Context, name string, after uint64, maxBytes int, touch bool) (StreamRead, error)
	// StreamHead returns the stream's state without touching it.
	StreamHead(ctx context.Context, name string) (StreamInfo, error)
	// TouchStream slides the stream's TTL (an access that reads nothing).
	TouchStream(ctx context.Context, name string) (StreamInfo, error)
	// DeleteStream deletes the stream; one that forks still read from is
	// kept as a tombstone (kind StreamGone) until its last fork is gone.
	DeleteStream(ctx context.Context, name string) error
	// SubscribeStream calls fn (without blocking it for long) whenever the
	// stream changes, on any node sharing the journal, from now until
	// cancel. fn carries no data: the subscriber reads.
	SubscribeStream(name string, fn func()) (cancel func())
	// ReapStreams deletes the streams expired at now and returns how many.
	ReapStreams(ctx context.Context, now time.Time) (int, error)
}

// StreamMeta is a stream's stored state. Version grows by one with every
// commit; Gen names one incarnation of the name (a stream deleted and
// created again has a new Gen, and its old records are never read).
type StreamMeta struct {
	Version     uint64 `json:"v"`
	Gen         string `json:"gen"`
	Owner       string `json:"owner"`
	ContentType string `json:"ct"`
	TTL         int64  `json:"ttl,omitempty"` // seconds, when HasTTL
	HasTTL      bool   `json:"has_ttl,omitempty"`
	ExpiresAt   int64  `json:"exp_at,omitempty"` // unix ms, 0 = none
	// LastAccess (unix ms) is when the TTL window last slid.
	LastAccess int64 `json:"access"`
	CreatedAt  int64 `json:"created"`
	// Records and Bytes are the tail: how many records, how many bytes.
	Records uint64 `json:"n"`
	Bytes   uint64 `json:"bytes"`
	Closed  bool   `json:"closed,omitempty"`
	// ClosedBy is the producer tuple whose append closed the stream.
	ClosedBy *ProducerTuple `json:"closed_by,omitempty"`
	// StreamSeq is the last writer sequence (Stream-Seq) accepted.
	StreamSeq string                    `json:"sseq,omitempty"`
	Producers map[string]*ProducerState `json:"prod,omitempty"`
	// Fork is how the stream was forked, for an idempotent re-create.
	Fork *StreamFork `json:"fork,omitempty"`
	// Forks counts the living streams forked from this one; Deleted marks
	// a tombstone kept for them.
	Forks   int  `json:"forks,omitempty"`
	Deleted bool `json:"deleted,omitempty"`
	// Doc is a document's content when the name holds a document (Docs),
	// not a stream: it has no records and never expires.
	Doc json.RawMessage `json:"doc,omitempty"`
}

// Expiring reports whether the stream has a TTL or an absolute expiry.
func (m *StreamMeta) Expiring() bool { return m.HasTTL || m.ExpiresAt != 0 }

// ExpiredAt reports whether the stream has expired at now.
func (m *StreamMeta) ExpiredAt(now time.Time) bool {
	ms := now.UnixMilli()
	if m.ExpiresAt != 0 && ms >= m.ExpiresAt {
		return true
	}
	return m.HasTTL && ms >= m.LastAccess+m.TTL*1000
}

// ProducerTuple names one append of an idempotent producer.
type ProducerTuple struct {
	ID    string `json:"id"`
	Epoch uint64 `json:"epoch"`
	Seq   uint64 `json:"seq"`
}

// ProducerState is what a stream remembers of a producer.
type ProducerState struct {
	Epoch   uint64 `json:"epoch"`
	LastSeq uint64 `json:"seq"`
	Used    int64  `json:"used"` // unix ms of its last append, for eviction
}

// StreamFork is a fork's origin as its create asked for it.
type StreamFork struct {
	From      string `json:"from"`
	Offset    uint64 `json:"offset"`     // records inherited whole
	HasOffset bool   `json:"has_offset"` // Offset was given (else: the source's tail)
	Sub       uint64 `json:"sub,omitempty"`
}

// StreamRecord is one append's data: for a JSON stream, Count messages,
// each a JSON value, joined by commas; for the others, bytes (Count 0).
// End is the stream's byte count after the record; Index its position
// (1 for the first record).
type StreamRecord struct {
	Index uint64 `json:"i"`
	End   uint64 `json:"e"`
	Count int    `json:"c,omitempty"`
	Data  []byte `json:"d"`
}

// StreamCreate is a create's request.
type StreamCreate struct {
	Owner       string
	ContentType string // "" inherits a fork's source's, else is required
	TTL         int64
	HasTTL      bool
	ExpiresAt   int64 // unix ms
	Closed      bool
	// Initial is the stream's first content (a JSON stream's messages
	// already flattened: one record of Count messages).
	Initial *StreamRecord
	Fork    *StreamFork
}

// StreamAppend is an append's request. Data may be empty only with Close.
type StreamAppend struct {
	ContentType string // compared by media type with the stream's ("" only with a close)
	Data        []byte
	Count       int // JSON messages in Data
	Close       bool
	StreamSeq   string
	Producer    *ProducerTuple
}

// StreamAppendResult is an accepted append's outcome.
type StreamAppendResult struct {
	Info StreamInfo
	// Duplicate: the producer tuple was accepted before; nothing was
	// appended. Epoch and Seq are the producer's state after the append.
	Duplicate bool
	Epoch     uint64
	Seq       uint64
}

// StreamInfo is a stream's state as the edge shows it.
type StreamInfo struct {
	Meta StreamMeta
}

// StreamRead is a read's outcome: the records, and the stream's state when
// they were read (Meta.Records is the tail).
type StreamRead struct {
	Records []StreamRecord
	Meta    StreamMeta
}

// StreamErrKind is what went wrong with a stream operation.
type StreamErrKind int

// The kinds of StreamError.
const (
	StreamNotFound       StreamErrKind = iota + 1 // no such stream (or expired)
	StreamGone                                    // deleted, kept for its forks
	StreamConfigConflict                          // exists with another configuration
	StreamContentType                             // append's content type is not the stream's
	StreamClosed                                  // closed: no more appends
	StreamSeqConflict                             // Stream-Seq not above the last one
	ProducerStale                                 // epoch below the producer's (Epoch is the current)
	ProducerGap                                   // seq past the next one (Expected, Received)
	ProducerBadSeq                                // a new epoch not starting at seq 0
	StreamTooLarge                                // the stream would pass its bound
	StreamBadOffset                               // an offset past the tail, a bad sub-offset
	StreamBusy                                    // contention: the commit kept losing
)

// StreamError is the error of a stream operation refused for a reason the
// client can act on. Meta is the stream's state when it was refused (for
// the tail of a closed stream).
type StreamError struct {
	Kind     StreamErrKind
	Msg      string
	Meta     *StreamMeta
	Epoch    uint64 // ProducerStale: the current epoch
	Expected uint64 // ProducerGap
	Received uint64 // ProducerGap
}

func (e *StreamError) Error() string { return "journal: stream: " + e.Msg }

func streamErr(k StreamErrKind, m *StreamMeta, format string, args ...any) *StreamError {
	return &StreamError{Kind: k, Msg: fmt.Sprintf(format, args...), Meta: m}
}

// StreamStore is what a backend implements for NewStreams. Every method is
// safe for concurrent use; CommitStream is the one atomic step.
type StreamStore interface {
	// LoadStream returns the stream's meta, ErrNotFound when it has none.
	LoadStream(ctx context.Context, name string) (StreamMeta, error)
	// StreamRecords returns the records of gen with index from..to
	// (inclusive) that exist, in order.
	StreamRecords(ctx context.Context, name, gen string, from, to uint64) ([]StreamRecord, error)
	// CommitStream sets the stream's meta to next (next.Version is
	// prev+1) and appends recs after its last record, atomically, when its
	// stored version is prev (0: it has no meta). It is ErrConflict when
	// the version is not prev.
	CommitStream(ctx context.Context, name string, prev uint64, next StreamMeta, recs []StreamRecord) error
	// DropStream removes the stream's meta and records when its version is
	// version (ErrConflict otherwise).
	DropStream(ctx context.Context, name string, version uint64) error
	// ExpiringStreams lists (a superset of) the streams with a TTL or an
	// expiry; the caller re-checks each.
	ExpiringStreams(ctx context.Context) ([]string, error)
	// SubscribeStream and NotifyStream: a change of name, announced to
	// the subscribers on every node sharing the store.
	SubscribeStream(name string, fn func()) (cancel func())
	NotifyStream(ctx context.Context, name string)
}

// StreamHolder is a journal backend that holds durable streams too
// (journal/bolt, journal/redis and journal/mem are).
type StreamHolder interface {
	Streams(l StreamLimits) Streams
}
