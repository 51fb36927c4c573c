package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/runhub/runhub/protocol"
)

// An event row is the stored form of one envelope, the value at its
// position in the log:
//
//	version   1 byte  (rowVersion)
//	flags     1 byte  (bit 0: terminal)
//	created   8 bytes (float64 bits, big-endian)
//	seq       uvarint
//	run       uvarint length, bytes
//	type      uvarint length, bytes
//	session   uvarint length, bytes
//	payload   the rest (JSON)
//
// The event id is derived (run:seq). Run and seq are checked on read
// against the index that led to the row.
const rowVersion = 1

const rowTerminal = 1 << 0

// errRow reports a row that does not decode: a corrupt file or a bug.
var errRow = errors.New("journal/bolt: malformed event row")

// appendRow appends the row of e to dst.
func appendRow(dst []byte, e *protocol.Envelope) []byte {
	var flags byte
	if e.Terminal {
		flags |= rowTerminal
	}
	dst = append(dst, rowVersion, flags)
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(e.CreatedAt))
	dst = binary.AppendUvarint(dst, e.Seq)
	dst = binary.AppendUvarint(dst, uint64(len(e.RunID)))
	dst = append(dst, e.RunID...)
	dst = binary.AppendUvarint(dst, uint64(len(e.Type)))
	dst = append(dst, e.Type...)
	dst = binary.AppendUvarint(dst, uint64(len(e.SessionID)))
	dst = append(dst, e.SessionID...)
	return append(dst, e.Payload...)
}

// rowHeader is a decoded row without its payload copied.
type rowHeader struct {
	terminal  bool
	createdAt float64
	seq       uint64
	run       []byte
	typ       []byte
	session   []byte
	payload   []byte
}

// parseRow splits a row into its fields; the slices alias b.
func parseRow(b []byte) (rowHeader, error) {
	var h rowHeader
	if len(b) < 10 || b[0] != rowVersion || b[1]&^rowTerminal != 0 {
		return h, errRow
	}
	h.terminal = b[1]&rowTerminal != 0
	h.createdAt = math.Float64frombits(binary.BigEndian.Uint64(b[2:10]))
	rest := b[10:]
	n, k := binary.Uvarint(rest)
	if k <= 0 {
		return h, errRow
	}
	h.seq, rest = n, rest[k:]
	var ok bool
	if h.run, rest, ok = lenPrefixed(rest); !ok {
		return h, errRow
	}
	if h.typ, rest, ok = lenPrefixed(rest); !ok {
		return h, errRow
	}
	if h.session, rest, ok = lenPrefixed(rest); !ok {
		return h, errRow
	}
	h.payload = rest
	return h, nil
}

func lenPrefixed(b []byte) (field, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
}

// rowDecoder turns rows of one run into envelopes. It copies payloads into
// shared chunks (one allocation per ~64 KiB rather than per event) and
// reuses the strings that repeat from row to row. The chunks start small
// and double, so that a read of a few events (a session's status folds
// its latest run) costs what it returns, not 64 KiB: a chunk lives as
// long as any payload in it, and a list of 100,000 sessions made 6 GB of
// them.
type rowDecoder struct {
	runID   string
	chunk   []byte
	session string
}

const (
	firstChunk  = 512      // a decoder's first shared chunk
	decodeChunk = 64 << 10 // the largest one
)

// decode returns the envelope stored as row b at seq. The result does not
// alias b, which bbolt owns.
func (d *rowDecoder) decode(seq uint64, b []byte) (protocol.Envelope, error) {
	h, err := parseRow(b)
	if err != nil {
		return protocol.Envelope{}, fmt.Errorf("%w: run %s seq %d", err, d.runID, seq)
	}
	if h.seq != seq || string(h.run) != d.runID {
		return protocol.Envelope{}, fmt.Errorf("%w: run %s seq %d found %s seq %d", errRow, d.runID, seq, h.run, h.seq)
	}
	if string(h.session) != d.session {
		d.session = string(h.session)
	}
	return protocol.Envelope{
		EventID:   d.runID + ":" + strconv.FormatUint(seq, 10),
		Seq:       seq,
		RunID:     d.runID,
		SessionID: d.session,
		Type:      eventType(h.typ),
		CreatedAt: h.createdAt,
		Terminal:  h.terminal,
		Payload:   d.copyPayload(h.payload),
	}, nil
}

func (d *rowDecoder) copyPayload(p []byte) []byte {
	if len(p) > decodeChunk/4 {
		return append([]byte(nil), p...)
	}
	if cap(d.chunk)-len(d.chunk) < len(p) {
		d.chunk = make([]byte, 0, max(min(2*cap(d.chunk), decodeChunk), firstChunk, len(p)))
	}
	start := len(d.chunk)
	d.chunk = append(d.chunk, p...)
	return d.chunk[start:len(d.chunk):len(d.chunk)]
}

// knownTypes interns the event type strings so that decoding a row does
// not allocate one.
var knownTypes = func() map[string]protocol.EventType {
	m := make(map[string]protocol.EventType)
	for _, t := range protocol.EventTypes() {
		m[string(t)] = t
	}
	return m
}()

func eventType(b []byte) protocol.EventType {
	if t, ok := knownTypes[string(b)]; ok {
		return t
	}
	return protocol.EventType(b)
}
