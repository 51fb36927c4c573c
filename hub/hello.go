package hub

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/runhub/runhub/protocol"
)

// renew records a welcomed hello whose credentials expire at expires (zero:
// never), arming the expiry timer unless the socket is closing; it calls
// expire with the timer's generation.
func (a *authState) renew(expires time.Time, out *outbox, expire func(gen uint64)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hello = true
	a.gen++
	if a.expiry != nil {
		a.expiry.Stop()
		a.expiry = nil
	}
	if !expires.IsZero() && !out.closed() {
		gen := a.gen
		a.expiry = time.AfterFunc(time.Until(expires), func() { expire(gen) })
	}
}

// end stops the expiry timer for good (after serve).
func (a *authState) end() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.expiry != nil {
		a.expiry.Stop()
	}
	a.gen++
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
		if !c.hub.claimSocket(p.Subject, c.id) {
			c.sendError(protocol.CodeLimitExceeded, "too many open sockets for this subject; close one first", protocol.MsgHello)
			c.closeWith(protocol.ClosePolicy, "too many sockets")
			return
		}
		c.subject, c.rd.claimed = p.Subject, true
		if c.rd.helloT != nil {
			c.rd.helloT.Stop()
			c.rd.helloT = nil
		}
	}
	c.rd.admin = p.Admin
	c.rd.compact = slices.Contains(m.Capabilities, protocol.CapCompactReplay)
	c.auth.renew(p.Expires, &c.out, c.expire)
	c.send(c.welcome())
}

// credentials verifies a hello's token. Without one, a socket whose
// upgrade carried a valid Authorization header keeps that principal.
func (c *conn) credentials(token string) (Principal, error) {
	if pre := c.rd.pre; token == "" && pre != nil && c.cfg.Authenticator != nil {
		if !pre.Expires.IsZero() && !time.Now().Before(pre.Expires) {
			return Principal{}, protocol.Errorf(protocol.CodeUnauthorized, "the token has expired")
		}
		return *pre, nil
	}
	return c.hub.Authenticate(token)
}

// expire closes the socket with 4401 when its credentials run out, unless
// a hello renewed them meanwhile (gen is stale then). The error and the
// close are queued holding auth.mu, so a renewal either wins or is ignored.
func (c *conn) expire(gen uint64) {
	c.failClose(protocol.CodeUnauthorized, "the token has expired; send hello with a fresh token before it does",
		protocol.CloseUnauthorized, "token expired", func() bool { return gen != c.auth.gen })
}

// helloTimeout closes a socket that has not been welcomed HelloTimeout
// after its upgrade: error protocol_error, then close 4400. A hello that
// lands meanwhile either won (auth.hello is set) or is ignored (closing).
func (c *conn) helloTimeout() {
	c.failClose(protocol.CodeProtocol, "no hello within "+c.cfg.HelloTimeout.String()+"; closing",
		protocol.CloseProtocol, "hello timeout", func() bool { return c.auth.hello })
}

// failClose queues error code/msg (ref hello) and the close with
// closeCode holding auth.mu, so that a hello racing the timer that calls
// it either wins (stale, called with auth.mu held, reports it) or is
// ignored (closing).
func (c *conn) failClose(code protocol.Code, msg string, closeCode int, reason string, stale func() bool) {
	b, _ := json.Marshal(protocol.ErrorMessage{Type: protocol.MsgError, Code: code, Message: msg, Ref: protocol.MsgHello})
	c.auth.mu.Lock()
	queued := !stale() && c.out.requestClose(b, closeCode, reason)
	c.auth.mu.Unlock()
	if queued {
		c.signal()
	}
}

func (c *conn) welcome() protocol.Welcome {
	mps := 0
	if c.rd.rate != nil {
		mps = int(c.rd.rate.Rate())
	}
	var caps []string
	if c.rd.compact {
		caps = []string{protocol.CapCompactReplay}
	}
	return protocol.Welcome{Type: protocol.MsgWelcome, Protocol: protocol.SubprotocolV1, ConnID: c.id, Capabilities: caps,
		HubID: c.cfg.HubID, Subject: c.subject, Limits: protocol.Limits{
			MaxFrameBytes: int(c.cfg.MaxFrameBytes), MaxWatch: c.cfg.MaxWatch,
			MaxMessageBytes: protocol.MaxClientMessageBytes, StatusIntervalMS: int(c.cfg.StatusInterval / time.Millisecond),
			MessagesPerSecond: mps}}
}
