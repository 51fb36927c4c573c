package protocol

import (
	"math"
	"strconv"
)

// AppendEventFrame appends the wire form of an event message for e to dst,
// the bytes EncodeEvent appends, and reports whether it could: it writes
// the frame field by field, without encoding/json, when e is of the shape
// nearly every event the hub sends takes — a token or reasoning delta as
// drivers emit it (validDelta), ids and type of plain ASCII, a finite
// created_at — and the result is byte for byte what json.Marshal makes of
// it (FuzzAppendEventFrame). Otherwise it appends nothing and returns
// false: the caller encodes e with encoding/json.
func AppendEventFrame(dst []byte, e *Envelope) ([]byte, bool) {
	key, ok := deltaIDKey(e.Type)
	if !ok || !plainJSON(e.EventID) || !plainJSON(e.RunID) || !plainJSON(e.SessionID) || !plainJSON(string(e.Type)) {
		return dst, false
	}
	// encoding/json writes a float64 in 'f' form between 1e-6 and 1e21,
	// in 'e' form (which it then trims) outside; it refuses NaN and ±Inf.
	if f := math.Abs(e.CreatedAt); math.IsNaN(f) || math.IsInf(f, 0) || (f != 0 && (f < 1e-6 || f >= 1e21)) {
		return dst, false
	}
	// json.Marshal compacts a RawMessage and escapes <, >, & and U+2028,
	// U+2029 in it: a delta of that shape is compact (no white space
	// outside its strings), so it goes as it is when it holds none of
	// those.
	if _, _, ok := deltaStrings(e.Payload, key); !ok || !htmlSafe(e.Payload) {
		return dst, false
	}
	dst = append(dst, `{"type":"event","event":{"event_id":"`...)
	dst = append(dst, e.EventID...)
	dst = append(dst, `","seq":`...)
	dst = strconv.AppendUint(dst, e.Seq, 10)
	dst = append(dst, `,"run_id":"`...)
	dst = append(dst, e.RunID...)
	dst = append(dst, `","session_id":"`...)
	dst = append(dst, e.SessionID...)
	dst = append(dst, `","type":"`...)
	dst = append(dst, e.Type...)
	dst = append(dst, `","created_at":`...)
	dst = strconv.AppendFloat(dst, e.CreatedAt, 'f', -1, 64)
	if e.Terminal {
		dst = append(dst, `,"terminal":true,"payload":`...)
	} else {
		dst = append(dst, `,"terminal":false,"payload":`...)
	}
	dst = append(dst, e.Payload...)
	return append(dst, "}}"...), true
}

// plainJSON reports whether encoding/json writes s as it is between its
// quotes: printable ASCII without a quote, a backslash or an HTML
// character.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// htmlSafe reports whether b holds none of what json.Marshal escapes in a
// RawMessage: <, >, &, U+2028 and U+2029 (E2 80 A8, E2 80 A9 in UTF-8).
func htmlSafe(b []byte) bool {
	for i, c := range b {
		switch c {
		case '<', '>', '&':
			return false
		case 0xE2:
			if i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9) {
				return false
			}
		}
	}
	return true
}
