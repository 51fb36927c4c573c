package protocol

import (
	"bytes"
	"encoding/json"
	"sync"
)

// maxKeptEncoder is the largest buffer an eventEncoder keeps between
// events: a huge payload's buffer is let go.
const maxKeptEncoder = 64 << 10

// eventEncoder encodes event frames; pooled so a frame costs one
// allocation (the frame itself).
type eventEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var encoderPool = sync.Pool{New: func() any {
	e := &eventEncoder{}
	e.enc = json.NewEncoder(&e.buf)
	return e
}}

// EncodeEventFrame is EncodeEvent(nil, e) — the same bytes:
// {"type":"event","event":<envelope as json.Marshal encodes it>} — with one
// allocation instead of three: deltas are written field by field
// (AppendEventFrame), anything else through a pooled encoder.
func EncodeEventFrame(e *Envelope) ([]byte, error) {
	// The frame's fixed text, the seq and created_at take under 160 bytes.
	n := 160 + len(e.EventID) + len(e.RunID) + len(e.SessionID) + len(e.Type) + len(e.Payload)
	if frame, ok := AppendEventFrame(make([]byte, 0, n), e); ok {
		return frame, nil
	}
	ee := encoderPool.Get().(*eventEncoder)
	defer encoderPool.Put(ee)
	ee.buf.Reset()
	ee.buf.WriteString(`{"type":"event","event":`)
	if err := ee.enc.Encode(e); err != nil { // escapes HTML as json.Marshal does
		return nil, err
	}
	b := ee.buf.Bytes()
	b = b[:len(b)-1] // Encode's newline
	frame := make([]byte, len(b)+1)
	copy(frame, b)
	frame[len(b)] = '}'
	if ee.buf.Cap() > maxKeptEncoder {
		ee.buf = bytes.Buffer{} // do not keep a huge payload's buffer
	}
	return frame, nil
}
