package tabsock

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"
	"unicode/utf8"
)

// MessageType is a data message's: text or binary.
type MessageType int

const (
	MessageText   MessageType = 1
	MessageBinary MessageType = 2
)

// StatusCode is a close frame's code (RFC 6455 §7.4).
type StatusCode int

// The close codes the package sends or checks.
const (
	StatusNormalClosure   StatusCode = 1000
	StatusGoingAway       StatusCode = 1001
	StatusProtocolError   StatusCode = 1002
	StatusNoStatusRcvd    StatusCode = 1005 // never on the wire: a close frame without a code
	StatusAbnormalClosure StatusCode = 1006 // never on the wire
	StatusInvalidPayload  StatusCode = 1007
	StatusPolicyViolation StatusCode = 1008
	StatusMessageTooBig   StatusCode = 1009
	StatusInternalError   StatusCode = 1011
	StatusServiceRestart  StatusCode = 1012
	StatusBadGateway      StatusCode = 1014
	StatusTLSHandshake    StatusCode = 1015 // never on the wire
)

// WebSocket opcodes.
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xa
)

// frameHeader is a frame's header as the client sent it.
type frameHeader struct {
	fin    bool
	rsv    byte // the three reserved bits: no extension is negotiated, so they must be 0
	opcode byte
	masked bool
	length int64
	key    [4]byte
}

// readFrameHeader reads a frame's header.
func (c *Conn) readFrameHeader() (frameHeader, error) {
	br := &c.br
	var b [8]byte
	if _, err := io.ReadFull(br, b[:2]); err != nil {
		return frameHeader{}, err
	}
	h := frameHeader{fin: b[0]&0x80 != 0, rsv: b[0] & 0x70, opcode: b[0] & 0x0f, masked: b[1]&0x80 != 0}
	switch n := b[1] & 0x7f; n {
	case 126:
		if _, err := io.ReadFull(br, b[:2]); err != nil {
			return frameHeader{}, err
		}
		h.length = int64(binary.BigEndian.Uint16(b[:2]))
	case 127:
		if _, err := io.ReadFull(br, b[:8]); err != nil {
			return frameHeader{}, err
		}
		h.length = int64(binary.BigEndian.Uint64(b[:8]))
		if h.length < 0 {
			return frameHeader{}, fmt.Errorf("received negative payload length: %v", h.length)
		}
	default:
		h.length = int64(n)
	}
	if h.masked {
		if _, err := io.ReadFull(br, h.key[:]); err != nil {
			return frameHeader{}, err
		}
	}
	return h, nil
}

// unmask unmasks p, the payload of a frame masked with key from offset
// pos of the payload on.
func unmask(p []byte, key [4]byte, pos int) {
	for i := range p {
		p[i] ^= key[(pos+i)&3]
	}
}

// ReadMessage reads the client's next message, answering the control
// frames that come before and between its frames: a ping with a pong, a
// close with a close (then the connection is closed). A protocol
// violation is answered with a close frame (1002; 1009 for a message over
// the limit) and an error, as is the end of the connection (io.EOF
// between messages; io.ErrUnexpectedEOF, or an error wrapping it or
// io.EOF, inside one: a message cut short is never returned); the caller
// then ends the socket (Close).
func (c *Conn) ReadMessage() (MessageType, []byte, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	return c.readMessage()
}

func (c *Conn) readMessage() (MessageType, []byte, error) {
	var msg []byte
	var typ byte // the message's opcode; 0 before its first frame
	defer c.disarmFrame()
	for {
		if typ == 0 {
			// Between messages a socket may stay idle as long as it
			// likes: the deadline starts with a frame's first byte and
			// covers the message it begins, fragments, control frames
			// between them and all, so that whatever the client sends a
			// partial message holds the reader at most FrameTimeout.
			c.disarmFrame()
			if _, err := c.br.Peek(1); err != nil {
				return 0, nil, err
			}
			c.armFrame()
		}
		h, err := c.readFrameHeader()
		if err == io.EOF && typ != 0 {
			err = io.ErrUnexpectedEOF // the connection ended inside a message
		}
		if err != nil {
			return 0, nil, c.frameTimedOut(err)
		}
		if h.rsv != 0 {
			return 0, nil, c.violation(StatusProtocolError, fmt.Errorf("received header with unexpected rsv bits set: %v:%v:%v", h.rsv&0x40 != 0, h.rsv&0x20 != 0, h.rsv&0x10 != 0))
		}
		if !h.masked {
			return 0, nil, errors.New("received unmasked frame from client")
		}
		switch h.opcode {
		case opClose, opPing, opPong:
			if err := c.controlFrame(h); err != nil {
				return 0, nil, c.frameTimedOut(err)
			}
			continue
		case opContinuation:
			if typ == 0 {
				return 0, nil, c.violation(StatusProtocolError, errors.New("received continuation frame without text or binary frame"))
			}
		case opText, opBinary:
			if typ != 0 {
				return 0, nil, c.violation(StatusProtocolError, errors.New("received new data message without finishing the previous message"))
			}
			typ = h.opcode
		default:
			return 0, nil, c.violation(StatusProtocolError, fmt.Errorf("received unknown opcode %v", h.opcode))
		}
		// The frame's length is compared with the room left under the
		// limit, never summed with what came before: a header may claim
		// up to 2^63-1 bytes, and a sum would overflow past the check.
		if limit := c.opts.ReadLimit; limit >= 0 && h.length > limit-int64(len(msg)) { // negative: no limit
			return 0, nil, c.violation(StatusMessageTooBig, fmt.Errorf("read limited at %d bytes", limit+1))
		}
		// The message grows as its bytes come (at most doubling), so a
		// frame that claims a megabyte and sends nothing holds no more
		// than a few KiB.
		for read := int64(0); read < h.length; {
			n := min(h.length-read, int64(max(4096, len(msg))))
			pos := len(msg)
			msg = slices.Grow(msg, int(n))[:pos+int(n)]
			if _, err := io.ReadFull(&c.br, msg[pos:]); err != nil {
				return 0, nil, c.frameTimedOut(fmt.Errorf("failed to read frame payload: %w", err))
			}
			unmask(msg[pos:], h.key, int(read))
			read += n
		}
		if h.fin {
			// RFC 6455 §8.1: a text message that is not UTF-8 fails the
			// connection with 1007 (docs/protocol.md §7.3: its cost).
			if typ == opText && !utf8.Valid(msg) {
				return 0, nil, c.violation(StatusInvalidPayload, errors.New("received invalid UTF-8 in a text message"))
			}
			return MessageType(typ), msg, nil
		}
	}
}

// armFrame sets the deadline of the message (or control frame) whose
// first byte has come: FrameTimeout, or sooner the closing handshake's.
func (c *Conn) armFrame() {
	if c.opts.FrameTimeout <= 0 {
		return
	}
	d := time.Now().Add(c.opts.FrameTimeout)
	if !c.closeBy.IsZero() && c.closeBy.Before(d) {
		d = c.closeBy
	}
	c.armed = true
	_ = c.conn.SetReadDeadline(d)
}

// disarmFrame lifts a frame's deadline (back to the closing handshake's,
// if any).
func (c *Conn) disarmFrame() {
	if c.armed {
		c.armed = false
		_ = c.conn.SetReadDeadline(c.closeBy)
	}
}

// frameTimedOut answers a message or frame that ran out of its
// FrameTimeout with a close frame (1008); other errors pass as they are.
func (c *Conn) frameTimedOut(err error) error {
	if c.armed && c.closeBy.IsZero() && errors.Is(err, os.ErrDeadlineExceeded) {
		return c.violation(StatusPolicyViolation, fmt.Errorf("frame not completed within %v", c.opts.FrameTimeout))
	}
	return err
}

// controlFrame reads and answers a control frame; an error ends the
// socket (a close frame always does).
func (c *Conn) controlFrame(h frameHeader) error {
	if h.length > 125 {
		return c.violation(StatusProtocolError, fmt.Errorf("received control frame payload with invalid length: %d", h.length))
	}
	if !h.fin {
		return c.violation(StatusProtocolError, errors.New("received fragmented control frame"))
	}
	var b [125]byte
	p := b[:h.length]
	if _, err := io.ReadFull(&c.br, p); err != nil {
		return fmt.Errorf("failed to read frame payload: %w", err)
	}
	unmask(p, h.key, 0)
	switch h.opcode {
	case opPing:
		return c.control(opPong, p)
	case opPong:
		return nil
	}
	code, reason, err := parseClose(p)
	if err != nil {
		return c.violation(StatusProtocolError, fmt.Errorf("received invalid close payload: %w", err))
	}
	if !utf8.ValidString(reason) { // §8.1 again; the reason is not echoed
		return c.violation(StatusInvalidPayload, errors.New("received invalid UTF-8 in a close reason"))
	}
	_ = c.close(code, reason) // the echo (nothing when our close went first)
	c.Close()
	return fmt.Errorf("received close frame: status = %v and reason = %q", code, reason)
}

// violation sends the client a close frame for err (its text the reason
// when it fits) and returns err.
func (c *Conn) violation(code StatusCode, err error) error {
	_ = c.close(code, err.Error())
	return err
}

// parseClose parses a close frame's payload; no code is 1005.
func parseClose(p []byte) (StatusCode, string, error) {
	switch {
	case len(p) == 0:
		return StatusNoStatusRcvd, "", nil
	case len(p) < 2:
		return 0, "", fmt.Errorf("close payload %q too small, cannot even contain the 2 byte status code", p)
	}
	code := StatusCode(binary.BigEndian.Uint16(p))
	if !validCloseCode(code) {
		return 0, "", fmt.Errorf("invalid status code %v", code)
	}
	return code, string(p[2:]), nil
}

// validCloseCode reports whether code may be sent in a close frame.
func validCloseCode(code StatusCode) bool {
	switch code {
	case 1004, StatusNoStatusRcvd, StatusAbnormalClosure, StatusTLSHandshake:
		return false
	}
	return code >= StatusNormalClosure && code <= StatusBadGateway || code >= 3000 && code <= 4999
}

// CloseHandshake sends the client a close frame and waits (at most
// ControlTimeout) for the client's, reading past what it still sends,
// then closes the connection.
func (c *Conn) CloseHandshake(code StatusCode, reason string) {
	defer c.Close()
	if c.close(code, reason) != nil {
		return
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.closeBy = time.Now().Add(ControlTimeout)
	_ = c.conn.SetReadDeadline(c.closeBy)
	for {
		if _, _, err := c.readMessage(); err != nil {
			return
		}
	}
}
