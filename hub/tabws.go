package hub

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// The server side of a tab's WebSocket (RFC 6455) once the hub has the
// connection: the opening handshake, reading the tab's messages with
// their control frames, and the closing handshake. The hub writes its own
// frames (wire.go); this file reads them and writes the control frames.
// It behaves as coder/websocket's Accept and Conn did for a tab socket
// (the same answers to a bad upgrade, the same close codes and reasons),
// without the library's Conn: with its locks, message reader and writer
// that was ~1.3 KiB of every open socket's heap, ~2.6 KiB of an idle
// hub's RSS per socket. Clients (the load generator, tests, the Go
// client) still use the library.

// errNoWire: a socket made without a connection (tests) was written to.
var errNoWire = errors.New("hub: the socket has no connection")

// wsGUID is RFC 6455's key suffix for Sec-WebSocket-Accept.
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// wsControlTimeout bounds writing a control frame, and waiting for the
// tab's close frame after the hub sent its own.
const wsControlTimeout = 5 * time.Second

// acceptTab checks a WebSocket upgrade request and answers it through hj:
// 101 with the subprotocol chosen among subprotocols (the tab's first that
// the hub speaks; "" when none), or the HTTP error of a bad request, as
// coder/websocket's Accept does. No compression extension is negotiated.
func acceptTab(hj *socketHijacker, r *http.Request, subprotocols []string) (string, error) {
	if code, err := checkUpgrade(hj.Header(), r); err != nil {
		http.Error(hj, err.Error(), code)
		return "", err
	}
	h := hj.Header()
	h.Set("Upgrade", "websocket")
	h.Set("Connection", "Upgrade")
	h.Set("Sec-WebSocket-Accept", acceptKey(r.Header.Get("Sec-WebSocket-Key")))
	proto := pickSubprotocol(r.Header, subprotocols)
	if proto != "" {
		h.Set("Sec-WebSocket-Protocol", proto)
	}
	hj.WriteHeader(http.StatusSwitchingProtocols)
	if err := hj.hijack(); err != nil {
		err = fmt.Errorf("failed to hijack connection: %w", err)
		http.Error(hj, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
		return "", err
	}
	return proto, nil
}

// checkUpgrade reports what is wrong with an upgrade request: the HTTP
// status and the error to answer with (the answer's headers set in h).
func checkUpgrade(h http.Header, r *http.Request) (int, error) {
	if !r.ProtoAtLeast(1, 1) {
		return http.StatusUpgradeRequired, fmt.Errorf("WebSocket protocol violation: handshake request must be at least HTTP/1.1: %q", r.Proto)
	}
	if !hasToken(r.Header, "Connection", "Upgrade") {
		h.Set("Connection", "Upgrade")
		h.Set("Upgrade", "websocket")
		return http.StatusUpgradeRequired, fmt.Errorf("WebSocket protocol violation: Connection header %q does not contain Upgrade", r.Header.Get("Connection"))
	}
	if !hasToken(r.Header, "Upgrade", "websocket") {
		h.Set("Connection", "Upgrade")
		h.Set("Upgrade", "websocket")
		return http.StatusUpgradeRequired, fmt.Errorf("WebSocket protocol violation: Upgrade header %q does not contain websocket", r.Header.Get("Upgrade"))
	}
	if r.Method != http.MethodGet {
		return http.StatusMethodNotAllowed, fmt.Errorf("WebSocket protocol violation: handshake request method is not GET but %q", r.Method)
	}
	if r.Header.Get("Sec-WebSocket-Version") != "13" {
		h.Set("Sec-WebSocket-Version", "13")
		return http.StatusBadRequest, fmt.Errorf("unsupported WebSocket protocol version (only 13 is supported): %q", r.Header.Get("Sec-WebSocket-Version"))
	}
	keys := r.Header.Values("Sec-WebSocket-Key")
	switch {
	case len(keys) == 0:
		return http.StatusBadRequest, errors.New("WebSocket protocol violation: missing Sec-WebSocket-Key")
	case len(keys) > 1:
		return http.StatusBadRequest, errors.New("WebSocket protocol violation: multiple Sec-WebSocket-Key headers")
	}
	key := strings.TrimSpace(keys[0])
	if v, err := base64.StdEncoding.DecodeString(key); err != nil || len(v) != 16 {
		return http.StatusBadRequest, fmt.Errorf("WebSocket protocol violation: invalid Sec-WebSocket-Key %q, must be a 16 byte base64 encoded string", key)
	}
	return 0, nil
}

// tokens lists the comma-separated tokens of a header's values.
func tokens(h http.Header, key string) []string {
	var out []string
	for _, v := range h.Values(key) {
		for _, t := range strings.Split(v, ",") {
			out = append(out, strings.TrimSpace(t))
		}
	}
	return out
}

func hasToken(h http.Header, key, token string) bool {
	for _, t := range tokens(h, key) {
		if strings.EqualFold(t, token) {
			return true
		}
	}
	return false
}

// pickSubprotocol returns the tab's spelling of the first of ours it
// offers, or "".
func pickSubprotocol(h http.Header, ours []string) string {
	offered := tokens(h, "Sec-WebSocket-Protocol")
	for _, sp := range ours {
		for _, cp := range offered {
			if strings.EqualFold(sp, cp) {
				return cp
			}
		}
	}
	return ""
}

func acceptKey(key string) string {
	s := sha1.Sum([]byte(key + wsGUID))
	return base64.StdEncoding.EncodeToString(s[:])
}

// WebSocket opcodes.
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xa
)

// frameHeader is a frame's header as the tab sent it.
type frameHeader struct {
	fin    bool
	rsv    byte // the three reserved bits: no extension is negotiated, so they must be 0
	opcode byte
	masked bool
	length int64
	key    [4]byte
}

// readFrameHeader reads a frame's header from br.
func readFrameHeader(br *bufio.Reader) (frameHeader, error) {
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

// readMessage reads the tab's next message, answering the control frames
// that come before and between its frames: a ping with a pong, a close
// with a close (then the connection is closed). A protocol violation is
// answered with a close frame (1002; 1009 for a message over the limit)
// and an error, as is the end of the connection; the caller then ends the
// socket.
func (c *conn) readMessage() (websocket.MessageType, []byte, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	br := c.rd.br
	var msg []byte
	var typ byte // the message's opcode; 0 before its first frame
	for {
		h, err := readFrameHeader(br)
		if err != nil {
			return 0, nil, err
		}
		if h.rsv != 0 {
			return 0, nil, c.violation(websocket.StatusProtocolError, fmt.Errorf("received header with unexpected rsv bits set: %v:%v:%v", h.rsv&0x40 != 0, h.rsv&0x20 != 0, h.rsv&0x10 != 0))
		}
		if !h.masked {
			return 0, nil, errors.New("received unmasked frame from client")
		}
		switch h.opcode {
		case opClose, opPing, opPong:
			if err := c.controlFrame(br, h); err != nil {
				return 0, nil, err
			}
			continue
		case opContinuation:
			if typ == 0 {
				return 0, nil, c.violation(websocket.StatusProtocolError, errors.New("received continuation frame without text or binary frame"))
			}
		case opText, opBinary:
			if typ != 0 {
				return 0, nil, c.violation(websocket.StatusProtocolError, errors.New("received new data message without finishing the previous message"))
			}
			typ = h.opcode
		default:
			return 0, nil, c.violation(websocket.StatusProtocolError, fmt.Errorf("received unknown opcode %v", h.opcode))
		}
		// The frame's length is compared with the room left under the
		// limit, never summed with what came before: a header may claim
		// up to 2^63-1 bytes, and a sum would overflow past the check.
		if limit := c.cfg.MaxFrameBytes; limit >= 0 && h.length > limit-int64(len(msg)) { // negative: no limit
			return 0, nil, c.violation(websocket.StatusMessageTooBig, fmt.Errorf("read limited at %d bytes", limit+1))
		}
		// The message grows as its bytes come (at most doubling), so a
		// frame that claims a megabyte and sends nothing holds no more
		// than a few KiB.
		for read := int64(0); read < h.length; {
			n := min(h.length-read, int64(max(4096, len(msg))))
			pos := len(msg)
			msg = slices.Grow(msg, int(n))[:pos+int(n)]
			if _, err := io.ReadFull(br, msg[pos:]); err != nil {
				return 0, nil, fmt.Errorf("failed to read frame payload: %w", err)
			}
			unmask(msg[pos:], h.key, int(read))
			read += n
		}
		if h.fin {
			return websocket.MessageType(typ), msg, nil
		}
	}
}

// controlFrame reads and answers a control frame; an error ends the
// socket (a close frame always does).
func (c *conn) controlFrame(br *bufio.Reader, h frameHeader) error {
	if h.length > 125 {
		return c.violation(websocket.StatusProtocolError, fmt.Errorf("received control frame payload with invalid length: %d", h.length))
	}
	if !h.fin {
		return c.violation(websocket.StatusProtocolError, errors.New("received fragmented control frame"))
	}
	var b [125]byte
	p := b[:h.length]
	if _, err := io.ReadFull(br, p); err != nil {
		return fmt.Errorf("failed to read frame payload: %w", err)
	}
	unmask(p, h.key, 0)
	switch h.opcode {
	case opPing:
		return c.wire.control(opPong, p)
	case opPong:
		return nil
	}
	code, reason, err := parseClose(p)
	if err != nil {
		return c.violation(websocket.StatusProtocolError, fmt.Errorf("received invalid close payload: %w", err))
	}
	_ = c.wire.close(code, reason) // the echo (nothing when the hub's close went first)
	c.wire.conn.Close()
	return fmt.Errorf("received close frame: status = %v and reason = %q", code, reason)
}

// violation sends the tab a close frame for err (its text the reason when
// it fits) and returns err.
func (c *conn) violation(code websocket.StatusCode, err error) error {
	_ = c.wire.close(code, err.Error())
	return err
}

// parseClose parses a close frame's payload; no code is 1005.
func parseClose(p []byte) (websocket.StatusCode, string, error) {
	switch {
	case len(p) == 0:
		return websocket.StatusNoStatusRcvd, "", nil
	case len(p) < 2:
		return 0, "", fmt.Errorf("close payload %q too small, cannot even contain the 2 byte status code", p)
	}
	code := websocket.StatusCode(binary.BigEndian.Uint16(p))
	if !validCloseCode(code) {
		return 0, "", fmt.Errorf("invalid status code %v", code)
	}
	return code, string(p[2:]), nil
}

// validCloseCode reports whether code may be sent in a close frame.
func validCloseCode(code websocket.StatusCode) bool {
	switch code {
	case 1004, websocket.StatusNoStatusRcvd, websocket.StatusAbnormalClosure, websocket.StatusTLSHandshake:
		return false
	}
	return code >= websocket.StatusNormalClosure && code <= websocket.StatusBadGateway || code >= 3000 && code <= 4999
}

// closeHandshake sends the tab a close frame and waits (at most
// wsControlTimeout) for the tab's, reading past what it still sends, then
// closes the connection.
func (c *conn) closeHandshake(code websocket.StatusCode, reason string) {
	defer c.wire.conn.Close()
	if c.wire.close(code, reason) != nil {
		return
	}
	_ = c.wire.conn.SetReadDeadline(time.Now().Add(wsControlTimeout))
	for {
		if _, _, err := c.readMessage(); err != nil {
			return
		}
	}
}

// control writes a control frame (server frames are not masked), waiting
// at most wsControlTimeout: a tab that takes nothing loses its socket.
func (w *wire) control(op byte, p []byte) error {
	var b [2 + 125]byte
	b[0], b[1] = 0x80|op, byte(len(p))
	n := copy(b[2:], p)
	t := time.AfterFunc(wsControlTimeout, func() { w.conn.Close() })
	defer t.Stop()
	_, err := w.Write(b[:2+n])
	return err
}

// close writes a close frame with code and reason (the reason dropped, and
// 1011 sent, when it does not fit, as coder/websocket does); nothing when
// one went out already (Write).
func (w *wire) close(code websocket.StatusCode, reason string) error {
	var p []byte
	if code != websocket.StatusNoStatusRcvd {
		if len(reason) > 123 || !validCloseCode(code) {
			code, reason = websocket.StatusInternalError, ""
		}
		p = binary.BigEndian.AppendUint16(nil, uint16(code))
		p = append(p, reason...)
	}
	return w.control(opClose, p)
}
