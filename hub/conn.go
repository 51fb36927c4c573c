package hub

import (
	"encoding/json"
	"time"

	"github.com/runhub/runhub/protocol"
)

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
func (c *conn) offerStatus(frame statusFrame) {
	if c.out.putStatus(frame) {
		c.signal()
	}
}

// offerStatuses queues several sessions' statuses at once (one lock, one
// wake-up); an unsent older status of a session is replaced.
func (c *conn) offerStatuses(offers []statusFrame) {
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
	c.sock.Close()
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
