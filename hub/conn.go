package hub

import (
	"context"
	"encoding/json"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/coder/websocket"
	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/hub/metrics"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// conn is one tab socket. The reader goroutine (serve) decodes and handles
// client messages; the writer goroutine, started on demand by signal,
// drains the outbound queues. Both stop when ctx ends.
//
// Its state is grouped by owner; each group's type states its contract.
// "The reader" is readLoop and the goroutine it handles each frame on: it
// starts one per frame and waits for it, so they run one at a time, in
// order, and count as one goroutine here.
//
//   - rd (reader): the reader goroutine's alone; no lock.
//   - watches: the sessions watched; the reader's, read by leave once serve
//     has returned; no lock.
//   - auth (authState): hello and the credentials' expiry, which the hello
//     and expiry timers read; under auth.mu.
//   - out (outbox): the outbound queues, the close request and the focus,
//     shared by the reader, the writer, the router, the tracker and the
//     timers; under out.mu.
//   - w (writer): the writer goroutine's lifecycle; an atomic and w.mu.
//
// The session the router has the socket in is the router's
// (router.focused), under router.mu. Lock order: auth.mu, out.mu, w.mu
// (greet and failClose look at the close request holding auth.mu; signal
// may start a writer holding out.mu), and router.mu before out.mu (the
// router offers events holding it). Nothing else is held while taking
// them.
//
// id, ws, ctx, cancel and socketEnv are set by newConn and never change.
// subject is set by the first hello, on the reader, before anything else
// reads it: the reader's calls into presence and tracker, and leave.
type conn struct {
	*socketEnv
	ws      *websocket.Conn
	id      string
	subject string
	ctx     context.Context
	cancel  context.CancelFunc

	rd      reader
	watches watches
	auth    authState
	out     outbox
	w       writer
}

// socketEnv is what a socket uses of its hub: made once by New, shared by
// all of the hub's sockets, never changed.
type socketEnv struct {
	cfg      *Config          // the hub's settings
	log      *slog.Logger     // cfg.Logger
	metrics  *metrics.Metrics // cfg.Metrics (nil: not counted)
	store    journal.Store    // the journal: watch, focus, catch-up
	router   *router          // live events of the focused session
	tracker  *tracker         // statuses of the watched sessions
	presence *presence        // who watches and focuses each session
	hub      socketHub
}

// socketHub is what a socket asks of the hub itself.
type socketHub interface {
	// claimSocket takes a slot of subject for the socket; false: none left.
	claimSocket(subject, id string) bool
	// releaseSocket gives the slot back.
	releaseSocket(subject, id string)
	// authenticate verifies a bearer token.
	authenticate(token string) (Principal, error)
	// Control runs one control for subject.
	Control(ctx context.Context, subject string, m *protocol.Control, key string) (protocol.ControlResult, error)
}

// reader is the reader goroutine's own state. Nothing else touches it (the
// hello timer's callback reads auth, not this), so it has no lock; leave
// reads claimed once serve has returned.
type reader struct {
	pre     *Principal // authenticated by the upgrade's Authorization header
	admin   bool
	claimed bool        // holds a slot of its subject (claimSocket)
	rate    *bucket     // nil: no limit
	helloT  *time.Timer // closes a socket that sends no hello in time (nil: none)
	compact bool        // hello took protocol.CapCompactReplay
}

// newConn makes a socket; pre is the principal of the upgrade's
// Authorization header, if any.
func newConn(h *Hub, ws *websocket.Conn, pre *Principal) *conn {
	ctx, cancel := context.WithCancel(h.ctx)
	// Cancelling the socket also closes it: that is what ends the read
	// parked in readLoop, which is given no context (see there).
	stop := func() {
		cancel()
		ws.CloseNow()
	}
	return &conn{socketEnv: &h.env, ws: ws, id: adapter.NewID("c_"), ctx: ctx, cancel: stop,
		rd: reader{pre: pre, rate: newBucket(h.cfg.MessagesPerSecond, h.cfg.MessageBurst, time.Now())},
		w:  writer{wake: make(chan struct{}, 1)}}
}

// serve runs the reader on the calling goroutine and the writer on another,
// and returns when both have stopped.
func (c *conn) serve() {
	if d := c.cfg.HelloTimeout; d > 0 {
		c.rd.helloT = time.AfterFunc(d, c.helloTimeout)
	}
	c.readLoop()
	c.cancel()
	if c.rd.helloT != nil {
		c.rd.helloT.Stop()
	}
	c.w.halt()
	c.ws.CloseNow()
	c.auth.end()
}

// leave gives back what the socket holds in its hub, after serve: its
// subject's slot, its watches, its focus and its presence.
func (c *conn) leave() {
	if c.rd.claimed {
		c.hub.releaseSocket(c.subject, c.id)
	}
	c.tracker.unwatch(c, c.watches.ids)
	if c.watches.all {
		c.tracker.unwatchOwner(c, c.subject)
	}
	c.router.unfocus(c)
	c.presence.gone(c)
}

func (c *conn) readLoop() {
	done := make(chan bool, 1)
	for {
		// No context: with one, the WebSocket library registers a
		// context.AfterFunc per read, ~0.4 KiB that an idle socket would
		// hold for its life. c.cancel closes the socket instead, and every
		// way a socket ends goes through it or closes the socket itself.
		typ, data, err := c.ws.Read(context.Background())
		if err != nil {
			return // read limit (1009), peer close, hub stop: the socket is done
		}
		// The frame is handled on a goroutine of its own, waited for, so
		// messages stay in order: decoding, watching, focusing and controls
		// grow a stack to several KiB, and this goroutine's stack, kept for
		// the socket's life while it waits in Read, stays small.
		go func() {
			ok := false
			defer func() {
				// As net/http did when the handler goroutine read the socket:
				// a panic ends this socket, not the hub.
				if p := recover(); p != nil {
					c.log.Error("panic handling a client frame", "conn_id", c.id, "panic", p, "stack", string(debug.Stack()))
				}
				done <- ok
			}()
			ok = c.handleFrame(typ, data)
		}()
		if !<-done {
			return
		}
	}
}

// handleFrame handles one client frame; false ends the socket.
func (c *conn) handleFrame(typ websocket.MessageType, data []byte) bool {
	if typ != websocket.MessageText {
		if c.admit(nil) {
			c.sendError(protocol.CodeBadRequest, "frames must be UTF-8 text", "")
		}
		return true
	}
	for _, line := range protocol.SplitBatch(data) {
		if !c.admit(line) {
			continue
		}
		if !c.handle(line) {
			return false
		}
	}
	return true
}

// handle processes one client message; false ends the socket.
func (c *conn) handle(line []byte) bool {
	m, err := protocol.DecodeClient(line)
	if err != nil {
		c.sendError(protocol.CodeOf(err), errMessage(err), refOf(line))
		return true
	}
	if c.out.closed() {
		return true // closing (expired token, flood, goaway): nothing more is handled
	}
	if !c.auth.hello { // the reader writes hello, so it reads it without auth.mu
		if m.Type != protocol.MsgHello {
			c.sendError(protocol.CodeProtocol, "the first message must be hello", m.Type)
			c.closeWith(protocol.CloseProtocol, "hello required")
			return true
		}
		c.greet(m.Hello, true)
		return true
	}
	switch m.Type {
	case protocol.MsgHello:
		// A fresh hello renews the credentials; answer welcome again.
		c.greet(m.Hello, false)
	case protocol.MsgWatch:
		c.watch(m.Watch)
	case protocol.MsgUnwatch:
		c.unwatch(m.Watch)
	case protocol.MsgFocus:
		c.setFocus(m.Focus)
	case protocol.MsgControl:
		c.control(m.Control)
	case protocol.MsgPing:
		c.send(protocol.Pong{Type: protocol.MsgPong, ID: m.Ping.ID, Time: protocol.Timestamp(time.Now())})
	}
	return true
}

// send queues a non-event message. A socket that lets QueueMessages pile up
// is closed with 1008.
func (c *conn) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		c.log.Error("encode message", "conn_id", c.id, "err", err)
		return
	}
	switch c.out.push(b, c.cfg.QueueMessages) {
	case pushed:
		c.signal()
	case pushFull:
		c.closeWith(protocol.ClosePolicy, "too many unanswered messages")
	}
}

func (c *conn) sendError(code protocol.Code, msg, ref string) {
	c.send(protocol.ErrorMessage{Type: protocol.MsgError, Code: code, Message: msg, Ref: ref})
}

// offerStatus queues a session's status; an unsent older one is replaced.
func (c *conn) offerStatus(sid string, frame []byte) {
	if c.out.putStatus(sid, frame) {
		c.signal()
	}
}

// offerStatuses queues several sessions' statuses at once (one lock, one
// wake-up); an unsent older status of a session is replaced.
func (c *conn) offerStatuses(offers []statusOffer) {
	if c.out.putStatuses(offers) {
		c.signal()
	}
}

// closeWith makes the writer flush queued messages, then close the socket
// with code.
func (c *conn) closeWith(code int, reason string) {
	c.out.requestClose(nil, code, reason)
	c.signal()
}

// goaway tells the tab to reconnect elsewhere and closes with 1012.
func (c *conn) goaway(reason string, after time.Duration) {
	c.send(protocol.Goaway{Type: protocol.MsgGoaway, Reason: reason, ReconnectAfterMS: int(after / time.Millisecond)})
	c.closeWith(protocol.CloseServiceRestart, reason)
}

// abort drops the socket at once.
func (c *conn) abort() {
	c.cancel()
	c.ws.CloseNow()
}

func errMessage(err error) string {
	if pe, ok := err.(*protocol.Error); ok {
		return pe.Message
	}
	return err.Error()
}

// refOf extracts a message's id (or else type) for error refs, best effort.
func refOf(line []byte) string {
	var head struct {
		ID   any `json:"id"`
		Type any `json:"type"`
	}
	if json.Unmarshal(line, &head) != nil {
		return ""
	}
	if s, ok := head.ID.(string); ok && s != "" && len(s) <= protocol.MaxShortBytes {
		return s
	}
	if s, ok := head.Type.(string); ok && len(s) <= protocol.MaxShortBytes {
		return s
	}
	return ""
}
