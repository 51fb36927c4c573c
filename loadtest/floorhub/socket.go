package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/coder/websocket"
	"github.com/runhub/runhub/protocol"
)

// messageHead is the room left before a message's payload for its frame
// header (at most 10 bytes for a server frame).
const messageHead = 10

// message is one server message ready to go out: frame is the whole
// WebSocket frame (header then payload), built once for every socket.
type message struct {
	frame []byte
	head  int // header length
}

func (m message) payload() []byte { return m.frame[m.head:] }

// newMessage frames buf[messageHead:] as one final text frame, writing
// the header into the room left before it.
func newMessage(buf []byte) message {
	var h [messageHead]byte
	hdr := frameHeader(h[:0], opText, len(buf)-messageHead)
	start := messageHead - len(hdr)
	copy(buf[start:], hdr)
	return message{frame: buf[start:], head: len(hdr)}
}

// wire is how a socket's messages go in and out.
type wire interface {
	read() ([]byte, error) // the next text message
	write(m message) error // m as one frame
	close()
}

// libWire is a socket through github.com/coder/websocket.
type libWire struct{ ws *websocket.Conn }

func (w libWire) read() ([]byte, error) {
	for {
		typ, b, err := w.ws.Read(context.Background())
		if err != nil || typ == websocket.MessageText {
			return b, err
		}
	}
}

func (w libWire) write(m message) error {
	return w.ws.Write(context.Background(), websocket.MessageText, m.payload())
}

func (w libWire) close() { w.ws.CloseNow() }

// tab is one socket: its watches and focus.
type tab struct {
	f *floor
	w wire

	// Touched by the socket's reader goroutine only.
	focus   *session
	watched []*session
	all     bool
}

func (t *tab) send(m message) {
	t.w.write(m) // a failed write ends the reader too; nothing to do here
}

func (f *floor) serveSocket(w http.ResponseWriter, r *http.Request) {
	var wi wire
	if f.write == writeLib {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{protocol.SubprotocolV1}})
		if err != nil {
			return // Accept has answered
		}
		if ws.Subprotocol() != protocol.SubprotocolV1 {
			ws.Close(websocket.StatusPolicyViolation, "subprotocol runhub.v1 required")
			return
		}
		ws.SetReadLimit(1 << 20)
		wi = libWire{ws}
	} else {
		rw, ok := acceptRaw(w, r)
		if !ok {
			return
		}
		wi = rw
	}
	t := &tab{f: f, w: wi}
	defer t.leave()
	for {
		b, err := wi.read()
		if err != nil {
			return
		}
		for line := range bytes.SplitSeq(b, []byte("\n")) {
			if len(bytes.TrimSpace(line)) > 0 {
				t.handle(line)
			}
		}
	}
}

// clientMessage is the part of a client message floorhub reads.
type clientMessage struct {
	Type      string   `json:"type"`
	ID        string   `json:"id"`
	Sessions  []string `json:"sessions"`
	All       bool     `json:"all"`
	SessionID *string  `json:"session_id"`
}

func (t *tab) handle(line []byte) {
	var m clientMessage
	if err := json.Unmarshal(line, &m); err != nil {
		t.sendJSON(protocol.ErrorMessage{Type: protocol.MsgError, Code: protocol.CodeBadRequest, Message: err.Error()})
		return
	}
	switch m.Type {
	case protocol.MsgHello:
		t.sendJSON(protocol.Welcome{Type: protocol.MsgWelcome, Protocol: protocol.SubprotocolV1, ConnID: newID("c_"),
			HubID: t.f.hubID, Subject: "local", Limits: protocol.Limits{MaxFrameBytes: 1 << 20, MaxWatch: 1000,
				MaxMessageBytes: 256 << 10, StatusIntervalMS: 1000}})
	case protocol.MsgWatch:
		if m.All && !t.all {
			t.all = true
			t.f.mu.Lock()
			t.f.all = append(slices.Clip(t.f.all), t)
			t.f.mu.Unlock()
		}
		for _, sid := range m.Sessions {
			if s := t.f.session(sid); s != nil && !slices.Contains(t.watched, s) {
				t.watched = append(t.watched, s)
				s.mu.Lock()
				s.watchers = append(slices.Clip(s.watchers), t)
				s.mu.Unlock()
			}
		}
	case protocol.MsgFocus:
		t.refocus(m.SessionID)
	case protocol.MsgPing:
		t.sendJSON(map[string]string{"type": protocol.MsgPong, "id": m.ID})
	}
}

// refocus moves the socket's focus. The replayed marker (nothing is
// replayed) is written under the session's mutex, as the socket joins the
// session: the run's next event finds it there and comes after.
func (t *tab) refocus(sid *string) {
	if t.focus != nil {
		t.focus.mu.Lock()
		t.focus.focused = without(t.focus.focused, t)
		t.focus.mu.Unlock()
		t.focus = nil
	}
	if sid == nil {
		return
	}
	s := t.f.session(*sid)
	if s == nil {
		t.sendJSON(protocol.ErrorMessage{Type: protocol.MsgError, Code: protocol.CodeNotFound, Message: "no such session", Ref: protocol.MsgFocus})
		return
	}
	t.focus = s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.focused = append(slices.Clip(s.focused), t)
	cursor := ""
	if r := s.current; r != nil {
		seq, _ := r.progress()
		cursor = eventID(r.id, seq)
	}
	t.sendJSON(protocol.Replayed{Type: protocol.MsgReplayed, SessionID: s.id, Cursor: cursor})
}

func (t *tab) sendJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	t.send(newMessage(append(make([]byte, messageHead, messageHead+len(b)), b...)))
}

// leave takes the closed socket out of its session and watch lists.
func (t *tab) leave() {
	t.w.close()
	t.refocus(nil)
	for _, s := range t.watched {
		s.mu.Lock()
		s.watchers = without(s.watchers, t)
		s.mu.Unlock()
	}
	if t.all {
		t.f.mu.Lock()
		t.f.all = without(t.f.all, t)
		t.f.mu.Unlock()
	}
}

// without is a copy of ts without t (copy-on-write: readers keep the old).
func without(ts []*tab, t *tab) []*tab {
	return slices.DeleteFunc(slices.Clone(ts), func(x *tab) bool { return x == t })
}
