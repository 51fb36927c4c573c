package hub

import (
	"context"
	"fmt"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/hub/httpx"
	"github.com/runhub/runhub/hub/tabsock"
	"github.com/runhub/runhub/internal/ratelimit"
	"github.com/runhub/runhub/protocol"
)

// A tab socket from its upgrade to its end: ServeWS, the socket's reader
// (Next, handleFrame, handle, which dispatches each client message to
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
	sock, proto, err := tabsock.Accept(w, r, tabsock.Options{Subprotocols: []string{protocol.SubprotocolV1},
		ReadLimit: h.cfg.MaxFrameBytes, FrameTimeout: h.cfg.FrameTimeout})
	if err != nil {
		return // Accept has written the HTTP error
	}
	c := newConn(h, sock, pre)
	if proto != protocol.SubprotocolV1 {
		sock.CloseHandshake(tabsock.StatusPolicyViolation, "subprotocol runhub.v1 required")
		return
	}
	h.mu.Lock()
	if h.draining {
		h.mu.Unlock()
		sock.CloseHandshake(tabsock.StatusServiceRestart, "shutting down")
		return
	}
	h.conns[c] = struct{}{}
	h.wg.Add(1)
	h.mu.Unlock()
	// net/http lets go of a hijacked connection when the handler returns,
	// so returning frees the request and this goroutine's stack (grown by
	// routing and the upgrade) for as long as the tab stays connected.
	// With the hub's poller the socket has no goroutine while idle.
	c.begin()
	sock.Serve(h.socketPoller(), c)
}

// socketPoller returns the hub's poller, made and started by the first
// socket (a hub that serves none has none); nil: none (no epoll, or the
// hub has stopped).
func (h *Hub) socketPoller() *tabsock.Poller {
	h.pollMu.Lock()
	defer h.pollMu.Unlock()
	if h.poller == nil && !h.pollStopped {
		h.poller = tabsock.NewPoller()
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
func newConn(h *Hub, sock *tabsock.Conn, pre *Principal) *conn {
	// The socket's context is not the hub's child: a child is an entry in
	// the hub context's map of children for the socket's life, and the
	// hub ends its sockets itself (Shutdown: goaway, or abort past its
	// deadline). Cancelling the socket also closes it: that is what ends
	// a read in flight, which is given no context (Next), and a write in
	// flight.
	// It also wakes the writer goroutine, which waits for its wake token,
	// not for the context's Done channel (writeLoop).
	ctx, cancel := context.WithCancel(context.Background())
	snd := h.senders[int(h.nextSnd.Add(1))%len(h.senders)]
	c := &conn{socketEnv: &h.env, sock: sock, id: adapter.NewID("c_"), ctx: ctx, snd: snd,
		rd: reader{pre: pre, rate: ratelimit.New(h.cfg.MessagesPerSecond, h.cfg.MessageBurst, time.Now())},
		w:  writer{wake: make(chan struct{}, 1)}}
	c.cancel = func() {
		cancel()
		sock.Close()
		select {
		case c.w.wake <- struct{}{}:
		default:
		}
	}
	c.w.loop = c.writeLoop
	return c
}

// begin arms the hello timeout.
func (c *conn) begin() {
	if d := c.cfg.HelloTimeout; d > 0 {
		c.rd.helloT = time.AfterFunc(d, c.helloTimeout)
	}
}

// End ends the socket once its reader is done (tabsock.Reader): the
// writer stopped, the connection closed, then the hub forgets it.
func (c *conn) End() {
	c.cancel()
	if c.rd.helloT != nil {
		c.rd.helloT.Stop()
	}
	c.w.halt()
	c.sock.Close()
	c.auth.end()
	c.hub.drop(c)
}

// Next reads one message and handles it; false ends the socket
// (tabsock.Reader). As net/http did when the handler goroutine read the
// socket, a panic ends this socket, not the hub.
func (c *conn) Next() (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("panic handling a client frame", "conn_id", c.id, "panic", p, "stack", string(debug.Stack()))
			ok = false
		}
	}()
	// No context: c.cancel closes the socket instead, and every way a
	// socket ends goes through it or closes the socket itself.
	typ, data, err := c.sock.ReadMessage()
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

// handleFrame handles one client frame; false ends the socket.
func (c *conn) handleFrame(typ tabsock.MessageType, data []byte) bool {
	if typ != tabsock.MessageText {
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
	ok, warn, flood := c.rd.rate.Take(time.Now())
	if ok {
		return true
	}
	if op, id := refusedControl(line); id != "" && !c.out.closed() {
		msg := fmt.Sprintf("over %g messages per second; the control was dropped: send it again later", c.rd.rate.Rate())
		c.metrics.Control(op, "", &protocol.Error{Code: protocol.CodeRateLimited, Message: msg})
		c.answerFailed(id, protocol.CodeRateLimited, msg)
		warn = false // that error tells the socket it is over its rate
	}
	switch {
	case flood:
		c.sendError(protocol.CodeRateLimited, "message flood; closing", "")
		c.closeWith(protocol.ClosePolicy, "message rate exceeded")
	case warn:
		c.sendError(protocol.CodeRateLimited, fmt.Sprintf("over %g messages per second; messages are dropped until the rate falls", c.rd.rate.Rate()), "")
	}
	return false
}
