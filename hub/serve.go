package hub

import (
	"context"
	"fmt"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/coder/websocket"
	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/hub/httpx"
	"github.com/runhub/runhub/protocol"
)

// A tab socket from its upgrade to its end: ServeWS, the socket's reader
// (readLoop, handleFrame, handle, which dispatches each client message to
// hello.go, watch.go, focus.go and control.go) and leave. It sits on top
// of the socket's files: it calls into them, none of them calls into it.

// ServeWS upgrades GET /v1/ws to a tab socket.
func (h *Hub) ServeWS(w http.ResponseWriter, r *http.Request) {
	if h.Draining() {
		httpx.WriteJSONError(w, http.StatusServiceUnavailable, protocol.Errorf(protocol.CodeUnavailable, "the hub is shutting down"))
		return
	}
	if err := httpx.OriginAllowed(r, h.cfg.OriginPatterns); err != nil {
		h.log.Info("websocket upgrade refused: cross-origin", "origin", r.Header.Get("Origin"), "host", r.Host)
		httpx.WriteJSONError(w, http.StatusForbidden, httpx.ErrOrigin)
		return
	}
	// A non-browser client may authenticate the upgrade itself; a browser
	// sends its token in hello.
	var pre *Principal
	if token, ok := httpx.Bearer(r); ok && h.cfg.Authenticator != nil {
		p, err := h.Authenticate(token)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="runhub", error="invalid_token"`)
			httpx.WriteJSONError(w, http.StatusUnauthorized, err.(*protocol.Error))
			return
		}
		pre = &p
	}
	hj := &socketHijacker{ResponseWriter: w}
	proto, err := acceptTab(hj, r, []string{protocol.SubprotocolV1})
	if err != nil {
		return // acceptTab has written the HTTP error
	}
	c := newConn(h, hj, pre)
	if proto != protocol.SubprotocolV1 {
		c.closeHandshake(websocket.StatusPolicyViolation, "subprotocol runhub.v1 required")
		return
	}
	h.mu.Lock()
	if h.draining {
		h.mu.Unlock()
		c.closeHandshake(websocket.StatusServiceRestart, "shutting down")
		return
	}
	h.conns[c] = struct{}{}
	h.wg.Add(1)
	h.mu.Unlock()
	// net/http lets go of a hijacked connection when the handler returns,
	// so returning frees the request and this goroutine's stack (grown by
	// routing and the upgrade) for as long as the tab stays connected.
	if c.polled(h.socketPoller()) {
		// No goroutine of its own: the hub's poller waits for its bytes.
		c.begin()
		c.next()
		return
	}
	go func() {
		c.serve()
		h.drop(c)
	}()
}

// socketPoller returns the hub's poller, made and started by the first
// socket (a hub that serves none has none); nil: none (no epoll, or the
// hub has stopped).
func (h *Hub) socketPoller() idlePoller {
	h.pollMu.Lock()
	defer h.pollMu.Unlock()
	if h.poller == nil && !h.pollStopped {
		if p := newPoller(); p != nil {
			p.turn = (*conn).turn
			p.start()
			h.poller, h.env.poller = p, p
		}
	}
	return h.poller
}

// drop forgets a socket that has ended (serve or turn): its place in the
// hub, then what it holds (leave).
func (h *Hub) drop(c *conn) {
	h.mu.Lock()
	delete(h.conns, c)
	h.mu.Unlock()
	c.leave()
	h.wg.Done()
}

// newConn makes a socket; pre is the principal of the upgrade's
// Authorization header, if any.
func newConn(h *Hub, hj *socketHijacker, pre *Principal) *conn {
	// The socket's context is not the hub's child: a child is an entry in
	// the hub context's map of children for the socket's life, and the
	// hub ends its sockets itself (Shutdown: goaway, or abort past its
	// deadline). Cancelling the socket also closes it: that is what ends
	// the read parked in readLoop, which is given no context (see there),
	// and a write in flight.
	// It also wakes the writer goroutine, which waits for its wake token,
	// not for the context's Done channel (writeLoop).
	ctx, cancel := context.WithCancel(context.Background())
	snd := h.senders[int(h.nextSnd.Add(1))%len(h.senders)]
	c := &conn{socketEnv: &h.env, wire: hj.wire, id: adapter.NewID("c_"), ctx: ctx, snd: snd,
		rd: reader{pre: pre, br: hj.br, rate: newBucket(h.cfg.MessagesPerSecond, h.cfg.MessageBurst, time.Now())},
		w:  writer{wake: make(chan struct{}, 1)}}
	conn := c.wire.conn
	c.cancel = func() {
		cancel()
		conn.Close()
		select {
		case c.w.wake <- struct{}{}:
		default:
		}
	}
	c.w.loop = c.writeLoop
	return c
}

// serve runs the reader on the calling goroutine and the writer on another,
// and returns when both have stopped (a socket its hub's poller does not
// wait for).
func (c *conn) serve() {
	c.begin()
	c.readLoop()
	c.stop()
}

// begin arms the hello timeout.
func (c *conn) begin() {
	if d := c.cfg.HelloTimeout; d > 0 {
		c.rd.helloT = time.AfterFunc(d, c.helloTimeout)
	}
}

// stop ends the socket once its reader is done: the writer stopped, the
// connection closed.
func (c *conn) stop() {
	c.cancel()
	if c.rd.helloT != nil {
		c.rd.helloT.Stop()
	}
	c.w.halt()
	c.wire.conn.Close()
	c.auth.end()
}

// polled reports whether the hub's poller waits for the socket's bytes
// (poller_linux.go): a plain socket, on a hub with a poller. It then has
// no goroutine while idle: each frame that arrives is read and handled on
// a goroutine started for it (turn).
func (c *conn) polled(p idlePoller) bool {
	if p == nil || c.poller != p || c.wire == nil || c.wire.conn.fd < 0 || c.rd.br == nil {
		return false
	}
	c.wire.conn.hook = c
	return true
}

// next waits for the tab's next frame: the socket is armed in the poller,
// or, with bytes buffered already or when it cannot be armed, given a
// turn at once.
func (c *conn) next() {
	if !c.buffered() && c.poller.arm(c, c.wire.conn.fd) {
		return
	}
	go c.turn()
}

// buffered reports bytes read from the connection (or ahead of the
// upgrade) that no frame has taken yet.
func (c *conn) buffered() bool {
	c.rbuf.Lock()
	defer c.rbuf.Unlock()
	return c.rd.br.Buffered() > 0 || c.wire.conn.prefixed()
}

// turn reads and handles the frames that have come, then arms the socket
// again; a read that fails (the socket closed) or a frame that ends the
// socket ends it here. Turns of a socket run one at a time: the next
// starts once this one has armed it.
func (c *conn) turn() {
	for {
		if !c.readFrame() {
			c.stop()
			c.hub.drop(c)
			return
		}
		if !c.buffered() && c.poller.arm(c, c.wire.conn.fd) {
			return
		}
	}
}

// connClosing is the socket's connection telling it that it closes
// (fdConn.Close): it leaves the poller's set first, and an armed socket
// gets a last turn, whose read fails.
func (c *conn) connClosing() {
	if c.poller != nil {
		c.poller.closing(c, c.wire.conn.fd)
	}
}

// readFrame reads one frame and handles it; false ends the socket. As
// net/http did when the handler goroutine read the socket, a panic ends
// this socket, not the hub.
func (c *conn) readFrame() (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("panic handling a client frame", "conn_id", c.id, "panic", p, "stack", string(debug.Stack()))
			ok = false
		}
	}()
	// No context: c.cancel closes the socket instead, and every way a
	// socket ends goes through it or closes the socket itself.
	typ, data, err := c.readMessage()
	if err != nil {
		return false // read limit (1009), peer close, hub stop: the socket is done
	}
	return c.handleFrame(typ, data)
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
	for {
		// An idle socket's goroutine waits here, a few frames deep: its
		// stack stays at the 2 KiB it started with. Reading a frame
		// (readMessage, bufio, the connection) and handling it
		// (decoding, watching, focusing, controls) go deeper, so both run
		// on a goroutine of their own, waited for, so messages stay in
		// order; that goroutine's stack goes back to the runtime's cache
		// when it ends, where a reader parked in a read would keep it for
		// the socket's life.
		c.readable()
		done := make(chan bool, 1)
		go func() { done <- c.readFrame() }()
		if !<-done {
			return
		}
	}
}

// readable waits until a read of the socket would not wait for the tab:
// bytes are in the socket's read buffer or read ahead of the upgrade, or the
// connection has bytes, has ended or failed. Without a plain socket under
// the connection it returns at once (the read then waits, deeper). A
// failure is left to the read that follows, which ends the socket as
// before.
func (c *conn) readable() {
	if c.wire == nil || c.wire.conn.raw == nil || c.rd.br == nil {
		return
	}
	if c.buffered() {
		return
	}
	_ = c.wire.conn.waitReadable()
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

// admit applies the socket's rate limit to one client message (line; nil
// for a binary frame); false drops it. The socket is told once per second,
// and closed with 1008 on a flood. A dropped control is answered at once as
// a failed control (error rate_limited naming its id, then control_result
// not-active): its sender waits for an answer to that id, and the
// once-per-second error, which names no message, would leave it waiting
// forever. These answers are bounded too: past MessageBurst refusals in a
// second the socket closes, and a closing socket queues no answer.
func (c *conn) admit(line []byte) bool {
	ok, warn, flood := c.rd.rate.take(time.Now())
	if ok {
		return true
	}
	if op, id := refusedControl(line); id != "" && !c.out.closed() {
		msg := fmt.Sprintf("over %g messages per second; the control was dropped: send it again later", c.rd.rate.rate)
		c.metrics.Control(op, "", &protocol.Error{Code: protocol.CodeRateLimited, Message: msg})
		c.answerFailed(id, protocol.CodeRateLimited, msg)
		warn = false // that error tells the socket it is over its rate
	}
	switch {
	case flood:
		c.sendError(protocol.CodeRateLimited, "message flood; closing", "")
		c.closeWith(protocol.ClosePolicy, "message rate exceeded")
	case warn:
		c.sendError(protocol.CodeRateLimited, fmt.Sprintf("over %g messages per second; messages are dropped until the rate falls", c.rd.rate.rate), "")
	}
	return false
}
