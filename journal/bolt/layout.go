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
	bucketLog      = []byte("log")
	bucketIndex    = []byte("index")
	bucketKeys     = []byte("keys")
	bucketActive   = []byte("active")
	bucketEnded    = []byte("ended")
)

// Indexes of the top-level buckets in bucketNames.
const (
	bSessions = iota
	bOwners
	bRuns
	bHeads
	bLog
	bIndex
	bKeys
	bActive
	bEnded
	nBuckets
)

var bucketNames = [nBuckets][]byte{bucketSessions, bucketOwners, bucketRuns, bucketHeads,
	bucketLog, bucketIndex, bucketKeys, bucketActive, bucketEnded}

// logFill is the fill percent of the log: positions only grow, so a split
// page is never written into again and may as well be full.
const logFill = 1.0

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

// head is the changing part of a run's meta, written with every batch that
// appends to the run.
//
//	last seq      8 bytes big-endian
//	flags         1 byte (bit 0: terminal)
//	terminal at   8 bytes (float64 bits)
//	terminal type uvarint length, bytes
//	session id    uvarint length, bytes
//	pending       the extents not yet spilled to a segment (appendExtents)
//	keys          optional (absent when there are none): uvarint count, then
//	              per key uvarint length, bytes, uvarint seq — the newest
//	              idempotency keys, not yet spilled to the run's keys bucket
type head struct {
	lastSeq      uint64
	terminal     bool
	terminalAt   float64
	terminalType protocol.EventType
	sessionID    string
	pending      []extent
	keys         []headKey
}

// headKey is an idempotency key kept in the head and the seq it stored.
type headKey struct {
	key string
	seq uint64
}

var errHead = errors.New("journal/bolt: malformed run head")

func (h *head) encode() []byte {
	b := make([]byte, 0, 17+2*binary.MaxVarintLen64+len(h.terminalType)+len(h.sessionID)+4*len(h.pending)+16)
	b = binary.BigEndian.AppendUint64(b, h.lastSeq)
	var flags byte
	if h.terminal {
		flags = 1
	}
	b = append(b, flags)
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(h.terminalAt))
	b = binary.AppendUvarint(b, uint64(len(h.terminalType)))
	b = append(b, h.terminalType...)
	b = binary.AppendUvarint(b, uint64(len(h.sessionID)))
	b = append(b, h.sessionID...)
	b = appendExtents(b, h.pending)
	if len(h.keys) > 0 {
		b = binary.AppendUvarint(b, uint64(len(h.keys)))
		for _, k := range h.keys {
			b = binary.AppendUvarint(b, uint64(len(k.key)))
			b = append(b, k.key...)
			b = binary.AppendUvarint(b, k.seq)
		}
	}
	return b
}

func decodeHead(b []byte) (head, error) {
	if len(b) < 17 || b[8] > 1 {
		return head{}, errHead
	}
	h := head{
		lastSeq:    binary.BigEndian.Uint64(b),
		terminal:   b[8] == 1,
		terminalAt: math.Float64frombits(binary.BigEndian.Uint64(b[9:17])),
	}
	typ, rest, ok := lenPrefixed(b[17:])
	if !ok {
		return head{}, errHead
	}
	h.terminalType = eventType(typ)
	sess, rest, ok := lenPrefixed(rest)
	if !ok {
		return head{}, errHead
	}
	h.sessionID = string(sess)
	var err error
	if h.pending, rest, err = decodeExtents(nil, rest); err != nil {
		return head{}, errHead
	}
	if len(rest) == 0 {
		return h, nil // no keys (and every head written before they were kept here)
	}
	n, k := binary.Uvarint(rest)
	if k <= 0 || n == 0 || n > uint64(len(rest)) {
		return head{}, errHead
	}
	rest = rest[k:]
	h.keys = make([]headKey, 0, n)
	for range n {
		key, r, ok := lenPrefixed(rest)
		if !ok {
			return head{}, errHead
		}
		seq, k := binary.Uvarint(r)
		if k <= 0 {
			return head{}, errHead
		}
		h.keys = append(h.keys, headKey{key: string(key), seq: seq})
		rest = r[k:]
	}
	if len(rest) != 0 {
		return head{}, errHead
	}
	return h, nil
}

// loadRun reads a run's meta: its fixed part from runs and its head.
func loadRun(tx *bbolt.Tx, id string) (journal.RunMeta, error) {
	raw := tx.Bucket(bucketRuns).Get([]byte(id))
	hb := tx.Bucket(bucketHeads).Get([]byte(id))
	if raw == nil || hb == nil {
		return journal.RunMeta{}, fmt.Errorf("run %q: %w", id, journal.ErrNotFound)
	}
	var m journal.RunMeta
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, fmt.Errorf("journal/bolt: run %q meta: %w", id, err)
	}
	h, err := decodeHead(hb)
	if err != nil {
		return m, fmt.Errorf("run %q: %w", id, err)
	}
	m.LastSeq, m.Terminal, m.TerminalType, m.TerminalAt = h.lastSeq, h.terminal, h.terminalType, h.terminalAt
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

// readEvent reads the event at seq of a run through its index.
func readEvent(tx *bbolt.Tx, runID string, pending []extent, seq uint64) (protocol.Envelope, error) {
	exts, err := extentsAfter(tx.Bucket(bucketIndex), runID, pending, seq-1, 1)
	if err != nil {
		return protocol.Envelope{}, err
	}
	if len(exts) == 0 || exts[0].seq > seq {
		return protocol.Envelope{}, fmt.Errorf("journal/bolt: run %q has no event %d in its index", runID, seq)
	}
	pos := exts[0].pos + seq - exts[0].seq
	row := tx.Bucket(bucketLog).Get(be64(pos))
	if row == nil {
		return protocol.Envelope{}, fmt.Errorf("journal/bolt: run %q event %d: log position %d is missing", runID, seq, pos)
	}
	d := rowDecoder{runID: runID}
	return d.decode(seq, row)
}
