package bolt

import (
	"encoding/binary"
	"errors"
	"hash/crc32"

	"github.com/runhub/runhub/protocol"
)

// A record is one entry of the event log (seglog.go), framed so that a torn
// or corrupt tail is found on open:
//
//	length  4 bytes little-endian: the body's length, > 0
//	crc     4 bytes little-endian: CRC-32C (Castagnoli) of the body
//	body    kind 1 byte, then by kind:
//	          recEvent:  uvarint key length, key, the event row (row.go)
//	          recMarker: nothing — a batch that changes bbolt too starts here
//	                     (in doubt until bbolt's log end covers it; see doc.go)
//	          recCopy:   as recEvent: an event that compaction copied forward
//	          recStream: a durable stream's record: uvarint-prefixed name and
//	                     generation, uvarints index, end and message count,
//	                     then the data (streamrec.go)
//	          recStreamMeta: a stream's meta after a commit: uvarint-prefixed
//	                     name, then the meta's JSON (streamoverlay.go)
const (
	recHeader = 8

	recEvent      byte = 1
	recMarker     byte = 2
	recCopy       byte = 3
	recStream     byte = 4
	recStreamMeta byte = 5
)

// maxRecord bounds a record's body: far above any event the journal
// accepts (journal.Prepare bounds payloads), so a larger length is a torn or
// corrupt header, not a record.
const maxRecord = 64 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errRecord reports a record that does not frame: a torn tail or a corrupt
// file.
var errRecord = errors.New("journal/bolt: malformed log record")

// markerRecord is the whole record of a marker.
var markerRecord = func() []byte {
	body := []byte{recMarker}
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(body)))
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(body, castagnoli))
	return append(b, body...)
}()

// appendEventRecord appends the record of e, stored with key, to dst.
func appendEventRecord(dst []byte, kind byte, key string, e *protocol.Envelope) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, kind)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	dst = appendRow(dst, e)
	return sealRecord(dst, start)
}

// sealRecordWith fills the header of the record whose body is dst[start+
// recHeader:] followed by data, which the caller writes after it.
func sealRecordWith(dst []byte, start int, data []byte) []byte {
	body := dst[start+recHeader:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(body)+len(data)))
	crc := crc32.Update(crc32.Checksum(body, castagnoli), castagnoli, data)
	binary.LittleEndian.PutUint32(dst[start+4:], crc)
	return dst
}

// sealRecord fills the header of the record that starts at dst[start:].
func sealRecord(dst []byte, start int) []byte {
	body := dst[start+recHeader:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(body, castagnoli))
	return dst
}

// frame returns the body of the record at the start of b and the record's
// whole length. ok is false when b does not start with a whole, intact
// record (too short, zero or oversized length, or a CRC mismatch).
func frame(b []byte) (body []byte, n int, ok bool) {
	if len(b) < recHeader {
		return nil, 0, false
	}
	l := binary.LittleEndian.Uint32(b)
	if l == 0 || l > maxRecord || uint64(l) > uint64(len(b)-recHeader) {
		return nil, 0, false
	}
	body = b[recHeader : recHeader+int(l)]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return nil, 0, false
	}
	return body, recHeader + int(l), true
}

// eventBody is a decoded event record, its slices aliasing the record.
type eventBody struct {
	key []byte
	row []byte
}

// parseEventBody splits the body of a recEvent or recCopy record.
func parseEventBody(body []byte) (eventBody, error) {
	if len(body) < 1 || (body[0] != recEvent && body[0] != recCopy) {
		return eventBody{}, errRecord
	}
	key, rest, ok := lenPrefixed(body[1:])
	if !ok {
		return eventBody{}, errRecord
	}
	return eventBody{key: key, row: rest}, nil
}
