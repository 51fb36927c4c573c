package bolt

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"go.etcd.io/bbolt"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Top-level buckets (see the layout in doc.go).
var (
	bucketSessions = []byte("sessions")
	bucketOwners   = []byte("owners")
	bucketRuns     = []byte("runs")
	bucketHeads    = []byte("heads")
	bucketActive   = []byte("active")
	bucketEnded    = []byte("ended")
	bucketMeta     = []byte("meta")
	// The index of ended runs (endedindex.go): a run's offsets, and each
	// segment's count of ended runs' records.
	bucketEndedOffs = []byte("ended_offsets")
	bucketSegLive   = []byte("segment_live")
	// queued: the sessions whose queue holds a message (queued.go).
	bucketQueued = []byte("queued")
	// owner_keys: a session's key in owners (owners.go).
	bucketOwnerKeys = []byte("owner_keys")

	// The first layout's event buckets, read only to migrate (migrate.go).
	bucketLogV1   = []byte("log")
	bucketIndexV1 = []byte("index")
	bucketKeysV1  = []byte("keys")
)

// Indexes of the top-level buckets in bucketNames.
const (
	bSessions = iota
	bOwners
	bRuns
	bHeads
	bActive
	bEnded
	bMeta
	bEndedOffs
	bSegLive
	bQueued
	bOwnerKeys
	nBuckets
)

var bucketNames = [nBuckets][]byte{bucketSessions, bucketOwners, bucketRuns, bucketHeads,
	bucketActive, bucketEnded, bucketMeta, bucketEndedOffs, bucketSegLive, bucketQueued, bucketOwnerKeys}

// Keys of the meta bucket.
var (
	// metaFormat: be64 of the layout's version, formatEndedIndex. A file
	// without it is new (no heads) or of the first layout (migrate.go).
	metaFormat = []byte("format")
	// metaLogEnd: be64 of the event log's end when the last transaction
	// that changed bbolt together with the log committed. A batch of the
	// log that starts with a marker at or past it never committed
	// (recover.go).
	metaLogEnd = []byte("log_end")
	// metaQueuedIndex: present once the queued bucket lists every session
	// with a queued message (queued.go).
	metaQueuedIndex = []byte("queued_index")
	// metaOwnerKeysIndex: present once owner_keys holds every session's
	// key in owners (owners.go).
	metaOwnerKeysIndex = []byte("owner_keys_index")
)

// The layouts: formatSegments has events in segment files and durable
// streams' data in bbolt (stream_records); formatStreamLog has the
// streams' data in the segment files too; formatEndedIndex, the current
// one, also keeps the index of every ended run in bbolt (endedindex.go),
// so that an open reads the log only from where its active runs begin.
const (
	formatSegments   = 2
	formatStreamLog  = 3
	formatEndedIndex = 4
)

// createBuckets makes sure every top-level bucket exists.
func createBuckets(tx *bbolt.Tx) error {
	for _, name := range bucketNames {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("bucket %s: %w", name, err)
		}
	}
	return nil
}

// be64 is the big-endian form of n: log positions, and seqs as values.
func be64(n uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), n)
}

// ownerKey is the owners-index key of the n-th session, owned by owner.
func ownerKey(owner string, n uint64) []byte {
	k := binary.AppendUvarint(make([]byte, 0, len(owner)+12), uint64(len(owner)))
	k = append(k, owner...)
	return binary.BigEndian.AppendUint64(k, n)
}

// ownerPrefix is the common prefix of an owner's index keys.
func ownerPrefix(owner string) []byte {
	k := binary.AppendUvarint(nil, uint64(len(owner)))
	return append(k, owner...)
}

// endedKey is the ended-index key of a run whose terminal event was at ts.
func endedKey(ts float64, runID string) []byte {
	us := math.Round(ts * 1e6)
	switch {
	case us < 0 || math.IsNaN(us):
		us = 0
	case us >= 1<<63:
		us = 1<<63 - 1
	}
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(runID)), uint64(us))
	return append(k, runID...)
}

// head is what bbolt holds of a run's changing state, written when the
// run is registered and when it ends (its last seq is the log's to say):
//
//	born          8 bytes big-endian: the log offset before which no record
//	              is this run's (a run id deleted and registered again)
//	flags         1 byte (bit 0: terminal)
//	terminal at   8 bytes (float64 bits)
//	terminal type uvarint length, bytes
//	session id    uvarint length, bytes
type head struct {
	born         uint64
	terminal     bool
	terminalAt   float64
	terminalType protocol.EventType
	sessionID    string
}

var errHead = errors.New("journal/bolt: malformed run head")

func (h *head) encode() []byte {
	b := make([]byte, 0, 17+2*binary.MaxVarintLen64+len(h.terminalType)+len(h.sessionID))
	b = binary.BigEndian.AppendUint64(b, h.born)
	var flags byte
	if h.terminal {
		flags = 1
	}
	b = append(b, flags)
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(h.terminalAt))
	b = binary.AppendUvarint(b, uint64(len(h.terminalType)))
	b = append(b, h.terminalType...)
	b = binary.AppendUvarint(b, uint64(len(h.sessionID)))
	return append(b, h.sessionID...)
}

func decodeHead(b []byte) (head, error) {
	if len(b) < 17 || b[8] > 1 {
		return head{}, errHead
	}
	h := head{
		born:       binary.BigEndian.Uint64(b),
		terminal:   b[8] == 1,
		terminalAt: math.Float64frombits(binary.BigEndian.Uint64(b[9:17])),
	}
	typ, rest, ok := lenPrefixed(b[17:])
	if !ok {
		return head{}, errHead
	}
	h.terminalType = eventType(typ)
	sess, rest, ok := lenPrefixed(rest)
	if !ok || len(rest) != 0 {
		return head{}, errHead
	}
	h.sessionID = string(sess)
	return h, nil
}

// loadRun reads a run's meta: its fixed part from runs, its changing part
// from the index entry e (nil: registered this instant, no event yet).
func loadRun(tx *bbolt.Tx, id string, e *runEntry) (journal.RunMeta, error) {
	raw := tx.Bucket(bucketRuns).Get([]byte(id))
	if raw == nil {
		return journal.RunMeta{}, fmt.Errorf("run %q: %w", id, journal.ErrNotFound)
	}
	var m journal.RunMeta
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, fmt.Errorf("journal/bolt: run %q meta: %w", id, err)
	}
	m.LastSeq, m.Terminal, m.TerminalType, m.TerminalAt = 0, false, "", 0
	if e != nil {
		m.LastSeq, m.Terminal, m.TerminalType, m.TerminalAt = e.lastSeq, e.terminal, e.terminalType, e.terminalAt
	}
	return m, nil
}

// loadSession reads a session's meta.
func loadSession(tx *bbolt.Tx, id string) (journal.SessionMeta, error) {
	raw := tx.Bucket(bucketSessions).Get([]byte(id))
	if raw == nil {
		return journal.SessionMeta{}, fmt.Errorf("session %q: %w", id, journal.ErrNotFound)
	}
	var m journal.SessionMeta
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, fmt.Errorf("journal/bolt: session %q meta: %w", id, err)
	}
	return m, nil
}
