package hub

import (
	"context"
	"encoding/json"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/protocol"
)

// conn is one tab socket. The reader goroutine (serve) decodes and handles
// client messages; the writer goroutine, started on demand by signal,
// drains the outbound queues. Both stop when ctx ends.
type conn struct {
	h       *Hub
	ws      *websocket.Conn
	id      string
	subject string
	ctx     context.Context
	cancel  context.CancelFunc
	wake    chan struct{} // capacity 1: the writer has work
	cork    *corkWriter   // sends each frame with one write (nil: plain writes)

	// The writer goroutine runs only while the socket has something to send
	// (and lingers writerLinger after): wstate is 1 while one runs, 0 when
	// none does; wmu and wstop keep serve's wait from racing a start.
	wstate atomic.Int32
	wmu    sync.Mutex
	wstop  bool
	wwg    sync.WaitGroup

	// mu guards everything below.
	mu          sync.Mutex
	msgs        [][]byte          // control results, errors, pongs, welcome
	statuses    map[string][]byte // newest unsent status per session
	statusOrder []string          // sessions with an unsent status, in arrival order
	events      [][]byte          // focused events and replay markers, in order
	focus       focusState
	closing     bool
	closeCode   websocket.StatusCode
	closeReason string
	hello       bool
	watchAll    bool
	watched     []string    // sorted; the tracker's copy of each id (shared by every socket watching it)
	expiry      *time.Timer // fires when the credentials expire
	expiryGen   uint64      // bumped on every renewal; a stale timer does nothing

	// The reader goroutine alone uses these (subject is set by the first
	// hello, before anything reads it elsewhere).
	pre     *Principal // authenticated by the upgrade's Authorization header
	admin   bool
	claimed bool // counted in Hub.sockets
	rate    *bucket
	helloT  *time.Timer // closes a socket that sends no hello in time (nil: none)
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
	return &conn{h: h, ws: ws, id: adapter.NewID("c_"), ctx: ctx, cancel: stop, pre: pre,
		rate: newBucket(h.cfg.MessagesPerSecond, h.cfg.MessageBurst, time.Now()),
		wake: make(chan struct{}, 1)}
}

// serve runs the reader on the calling goroutine and the writer on another,
// and returns when both have stopped.
func (c *conn) serve() {
	if d := c.h.cfg.HelloTimeout; d > 0 {
		c.helloT = time.AfterFunc(d, c.helloTimeout)
	}
	c.readLoop()
	c.cancel()
	if c.helloT != nil {
		c.helloT.Stop()
	}
	c.wmu.Lock()
	c.wstop = true // no writer starts from now on
	c.wmu.Unlock()
	c.wwg.Wait()
	c.ws.CloseNow()
	c.mu.Lock()
	if c.expiry != nil {
		c.expiry.Stop()
	}
	c.expiryGen++
	c.mu.Unlock()
}

// release returns the socket's slot of its subject (after serve).
func (c *conn) release() {
	if c.claimed {
		c.h.releaseSocket(c.subject, c.id)
	}
}

// signal tells the writer there is work, starting one if none runs. It
// may be called with c.mu held.
func (c *conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
	if c.wstate.Load() == 0 && c.wstate.CompareAndSwap(0, 1) {
		c.startWriter()
	}
}

func (c *conn) startWriter() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.wstop {
		return // the socket is done; wstate stays 1, so nothing starts again
	}
	c.wwg.Add(1)
	go func() {
		defer c.wwg.Done()
		c.writeLoop()
	}()
}

// shrinkQueues lets an idle socket's empty queues go: they keep the
// capacity of their busiest moment (a replay fills events up to
// QueueEvents), and the status map its buckets. They are made again when
// needed.
func (c *conn) shrinkQueues() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.events) == 0 {
		c.events = nil
	}
	if len(c.msgs) == 0 {
		c.msgs = nil
	}
	if len(c.statusOrder) == 0 {
		c.statuses, c.statusOrder = nil, nil
	}
}

// retire ends an idle writer: true when the goroutine may return. Work
// signalled meanwhile either left a token in wake (seen here: the writer
// carries on, unless a new one has already started) or found wstate 0 and
// started a new writer.
func (c *conn) retire() bool {
	c.shrinkQueues()
	c.wstate.Store(0)
	if len(c.wake) == 0 {
		return true
	}
	return !c.wstate.CompareAndSwap(0, 1)
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
					c.h.log.Error("panic handling a client frame", "conn_id", c.id, "panic", p, "stack", string(debug.Stack()))
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
		if c.admit() {
			c.sendError(protocol.CodeBadRequest, "frames must be UTF-8 text", "")
		}
		return true
	}
	for _, line := range protocol.SplitBatch(data) {
		if !c.admit() {
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
	c.mu.Lock()
	hello, closing := c.hello, c.closing
	c.mu.Unlock()
	if closing {
		return true // closing (expired token, flood, goaway): nothing more is handled
	}
	if !hello {
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

// greet authenticates a hello and answers welcome: the first hello opens
// the socket for its subject, a later one renews the credentials (same
// subject) before they expire. A refused hello gets error unauthorized and
// close 4401, or limit_exceeded and close 1008 past MaxSocketsPerSubject.
func (c *conn) greet(m *protocol.Hello, first bool) {
	p, err := c.credentials(m.Token)
	if err == nil && !first && p.Subject != c.subject {
		err = protocol.Errorf(protocol.CodeUnauthorized, "a renewed token must have the socket's subject")
	}
	if err != nil {
		c.sendError(protocol.CodeUnauthorized, errMessage(err), protocol.MsgHello)
		c.closeWith(protocol.CloseUnauthorized, "unauthorized")
		return
	}
	if first {
		if !c.h.claimSocket(p.Subject, c.id) {
			c.sendError(protocol.CodeLimitExceeded, "too many open sockets for this subject; close one first", protocol.MsgHello)
			c.closeWith(protocol.ClosePolicy, "too many sockets")
			return
		}
		c.subject, c.claimed = p.Subject, true
		if c.helloT != nil {
			c.helloT.Stop()
			c.helloT = nil
		}
	}
	c.admin = p.Admin
	c.mu.Lock()
	c.hello = true
	c.expiryGen++
	if c.expiry != nil {
		c.expiry.Stop()
		c.expiry = nil
	}
	if !p.Expires.IsZero() && !c.closing {
		gen := c.expiryGen
		c.expiry = time.AfterFunc(time.Until(p.Expires), func() { c.expire(gen) })
	}
	c.mu.Unlock()
	c.send(c.welcome())
}

// credentials verifies a hello's token. Without one, a socket whose
// upgrade carried a valid Authorization header keeps that principal.
func (c *conn) credentials(token string) (Principal, error) {
	if token == "" && c.pre != nil && c.h.cfg.Authenticator != nil {
		if !c.pre.Expires.IsZero() && !time.Now().Before(c.pre.Expires) {
			return Principal{}, protocol.Errorf(protocol.CodeUnauthorized, "the token has expired")
		}
		return *c.pre, nil
	}
	return c.h.authenticate(token)
}

// expire closes the socket with 4401 when its credentials run out, unless
// a hello renewed them meanwhile (gen is stale then). The error and the
// close are queued under one lock, so a renewal either wins or is ignored.
func (c *conn) expire(gen uint64) {
	c.failClose(protocol.CodeUnauthorized, "the token has expired; send hello with a fresh token before it does",
		protocol.CloseUnauthorized, "token expired", func() bool { return gen != c.expiryGen })
}

// helloTimeout closes a socket that has not been welcomed HelloTimeout
// after its upgrade: error protocol_error, then close 4400. A hello that
// lands meanwhile either won (c.hello is set) or is ignored (closing).
func (c *conn) helloTimeout() {
	c.failClose(protocol.CodeProtocol, "no hello within "+c.h.cfg.HelloTimeout.String()+"; closing",
		protocol.CloseProtocol, "hello timeout", func() bool { return c.hello })
}

// failClose queues error code/msg (ref hello) and the close with
// closeCode under one lock, so that a hello racing the timer that calls
// it either wins (stale, checked under the lock, reports it) or is
// ignored (closing).
func (c *conn) failClose(code protocol.Code, msg string, closeCode int, reason string, stale func() bool) {
	b, _ := json.Marshal(protocol.ErrorMessage{Type: protocol.MsgError, Code: code, Message: msg, Ref: protocol.MsgHello})
	c.mu.Lock()
	if stale() || c.closing {
		c.mu.Unlock()
		return
	}
	c.msgs = append(c.msgs, b)
	c.closing, c.closeCode, c.closeReason = true, websocket.StatusCode(closeCode), reason
	c.mu.Unlock()
	c.signal()
}

func (c *conn) welcome() protocol.Welcome {
	mps := 0
	if c.rate != nil {
		mps = int(c.rate.rate)
	}
	return protocol.Welcome{Type: protocol.MsgWelcome, Protocol: protocol.SubprotocolV1, ConnID: c.id,
		HubID: c.h.cfg.HubID, Subject: c.subject, Limits: protocol.Limits{
			MaxFrameBytes: int(c.h.cfg.MaxFrameBytes), MaxWatch: c.h.cfg.MaxWatch,
			MaxMessageBytes: protocol.MaxClientMessageBytes, StatusIntervalMS: int(c.h.cfg.StatusInterval / time.Millisecond),
			MessagesPerSecond: mps}}
}

// send queues a non-event message. A socket that lets QueueMessages pile up
// is closed with 1008.
func (c *conn) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		c.h.log.Error("encode message", "conn_id", c.id, "err", err)
		return
	}
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	if len(c.msgs) >= c.h.cfg.QueueMessages {
		c.mu.Unlock()
		c.closeWith(protocol.ClosePolicy, "too many unanswered messages")
		return
	}
	c.msgs = append(c.msgs, b)
	c.mu.Unlock()
	c.signal()
}

func (c *conn) sendError(code protocol.Code, msg, ref string) {
	c.send(protocol.ErrorMessage{Type: protocol.MsgError, Code: code, Message: msg, Ref: ref})
}

// offerStatus queues a session's status; an unsent older one is replaced.
func (c *conn) offerStatus(sid string, frame []byte) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	if c.statuses == nil {
		c.statuses = map[string][]byte{}
	}
	if _, ok := c.statuses[sid]; !ok {
		c.statusOrder = append(c.statusOrder, sid)
	}
	c.statuses[sid] = frame
	c.mu.Unlock()
	c.signal()
}

// offerStatuses queues several sessions' statuses at once (one lock, one
// wake-up); an unsent older status of a session is replaced.
func (c *conn) offerStatuses(offers []statusOffer) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	if c.statuses == nil {
		c.statuses = make(map[string][]byte, len(offers))
	}
	for _, o := range offers {
		if _, ok := c.statuses[o.sid]; !ok {
			c.statusOrder = append(c.statusOrder, o.sid)
		}
		c.statuses[o.sid] = o.frame
	}
	c.mu.Unlock()
	c.signal()
}

// closeWith makes the writer flush queued messages, then close the socket
// with code.
func (c *conn) closeWith(code int, reason string) {
	c.mu.Lock()
	if !c.closing {
		c.closing, c.closeCode, c.closeReason = true, websocket.StatusCode(code), reason
	}
	c.mu.Unlock()
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
