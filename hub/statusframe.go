package hub

import (
	"bytes"

	"github.com/runhub/runhub/protocol"
)

// A status message as the hub queues and writes it (tracked.frame makes
// them, the outbox queues them, the writer joins their parts).

// presenceField is how a status message's presence starts: it is the last
// field of SessionStatus, and the session object always has fields before
// it.
const presenceField = `,"presence":`

// statusFrame is a status message in two parts: the status without its
// presence (tracked.enc, shared by every socket it goes to) and the
// presence, encoded, which the message carries as its last field.
// Presence changes with every tab that watches or focuses the session, so
// a burst of connecting tabs made a whole message (~0.7 KB) per tab and
// watched session, only to be copied into the socket's frame and dropped;
// as parts, a frame is made once per change of the status or of its
// presence and shared by every socket it goes to (tracked.framed), and
// the writer joins the parts as it copies them (appendTo). A frame is one
// pointer that also names its session, so the queues and a flush's
// offers hold 8 bytes per status (a burst of connecting tabs keeps a queue
// per watching socket, live at every collection meanwhile). Frames and
// their bytes are never changed once made; the zero frame is no status.
type statusFrame struct{ *frameParts }

type frameParts struct {
	sid  string // the session's id
	base []byte // the whole message when pres is nil; else it ends in the "}}" that closes the session and the message
	pres []byte // the presence, encoded
}

// lastFrame is the frame a session's status was last made into, and the
// presence it carries (presence values are replaced, never changed). The
// presence is kept here, not in the frame, so that a queued frame holds
// its bytes and nothing else.
type lastFrame struct {
	statusFrame
	of *protocol.Presence
}

// plainFrame is sid's status message encoded whole.
func plainFrame(sid string, b []byte) statusFrame {
	return statusFrame{&frameParts{sid: sid, base: b}}
}

// none reports whether f is the zero frame (a dropped status).
func (f statusFrame) none() bool { return f.frameParts == nil }

// size is the length of the message.
func (f statusFrame) size() int {
	if f.pres == nil {
		return len(f.base)
	}
	return len(f.base) + len(presenceField) + len(f.pres)
}

// appendTo appends the message to buf.
func (f statusFrame) appendTo(buf []byte) []byte {
	if f.pres == nil {
		return append(buf, f.base...)
	}
	buf = append(buf, f.base[:len(f.base)-2]...)
	buf = append(buf, presenceField...)
	buf = append(buf, f.pres...)
	return append(buf, "}}"...)
}

// equal reports whether f and g are the same message.
func (f statusFrame) equal(g statusFrame) bool {
	if f.frameParts == g.frameParts {
		return true
	}
	return (f.pres == nil) == (g.pres == nil) && bytes.Equal(f.base, g.base) && bytes.Equal(f.pres, g.pres)
}
