package main

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/runhub/runhub/protocol"
)

// Frame opcodes (RFC 6455 §5.2).
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xA
)

// maxClientMessage bounds a client message (the hub's MaxFrameBytes).
const maxClientMessage = 1 << 20

// frameHeader appends the header of one final, unmasked frame of n bytes.
func frameHeader(b []byte, op byte, n int) []byte {
	b = append(b, 0x80|op)
	switch {
	case n < 126:
		return append(b, byte(n))
	case n <= 0xFFFF:
		return binary.BigEndian.AppendUint16(append(b, 126), uint16(n))
	default:
		return binary.BigEndian.AppendUint64(append(b, 127), uint64(n))
	}
}

// rawWire is a socket upgraded by hand: frames are read and written on the
// hijacked connection with no library in between.
type rawWire struct {
	conn net.Conn
	br   *bufio.Reader // the hijacked reader: it may hold bytes already read
	mu   sync.Mutex    // one frame at a time on conn
}

// acceptRaw answers the upgrade (RFC 6455 §4.2.2) with runhub.v1 as the
// subprotocol, or writes an HTTP error and returns false.
func acceptRaw(w http.ResponseWriter, r *http.Request) (*rawWire, bool) {
	key := r.Header.Get("Sec-WebSocket-Key")
	switch {
	case !headerHas(r.Header, "Connection", "upgrade") || !headerHas(r.Header, "Upgrade", "websocket"):
		http.Error(w, "a WebSocket upgrade is required", http.StatusUpgradeRequired)
		return nil, false
	case r.Header.Get("Sec-WebSocket-Version") != "13" || key == "":
		http.Error(w, "WebSocket version 13 with a key is required", http.StatusBadRequest)
		return nil, false
	case !headerHas(r.Header, "Sec-WebSocket-Protocol", protocol.SubprotocolV1):
		http.Error(w, "subprotocol runhub.v1 required", http.StatusBadRequest)
		return nil, false
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "cannot hijack the connection", http.StatusInternalServerError)
		return nil, false
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		return nil, false
	}
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	resp := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Accept: " + base64.StdEncoding.EncodeToString(sum[:]) + "\r\n" +
		"Sec-WebSocket-Protocol: " + protocol.SubprotocolV1 + "\r\n\r\n"
	if _, err := conn.Write([]byte(resp)); err != nil {
		conn.Close()
		return nil, false
	}
	return &rawWire{conn: conn, br: brw.Reader}, true
}

// headerHas reports whether a comma-separated header holds token
// (case-insensitive).
func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// write sends m's frame in one net.Conn.Write: one write system call when
// the socket's buffer has room.
func (w *rawWire) write(m message) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := w.conn.Write(m.frame)
	return err
}

func (w *rawWire) close() { w.conn.Close() }

var errProtocol = errors.New("websocket protocol error")

// read returns the next text message, answering pings and closes on the
// way; binary messages are skipped.
func (w *rawWire) read() ([]byte, error) {
	var msg []byte
	var msgOp byte
	for {
		var h [8]byte
		if _, err := io.ReadFull(w.br, h[:2]); err != nil {
			return nil, err
		}
		fin, op, masked := h[0]&0x80 != 0, h[0]&0x0F, h[1]&0x80 != 0
		n := uint64(h[1] & 0x7F)
		switch n {
		case 126:
			if _, err := io.ReadFull(w.br, h[:2]); err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint16(h[:2]))
		case 127:
			if _, err := io.ReadFull(w.br, h[:8]); err != nil {
				return nil, err
			}
			n = binary.BigEndian.Uint64(h[:8])
		}
		if !masked || n > maxClientMessage || uint64(len(msg))+n > maxClientMessage {
			return nil, errProtocol // a client frame is masked (§5.1); too large
		}
		var mask [4]byte
		if _, err := io.ReadFull(w.br, mask[:]); err != nil {
			return nil, err
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(w.br, p); err != nil {
			return nil, err
		}
		for i := range p {
			p[i] ^= mask[i&3]
		}
		switch op {
		case opPing:
			w.write(newControl(opPong, p))
		case opPong:
		case opClose:
			w.write(newControl(opClose, p[:min(len(p), 2)])) // echo the code (§5.5.1)
			return nil, io.EOF
		case opText, opBinary, opContinuation:
			if op != opContinuation {
				msgOp, msg = op, nil
			}
			msg = append(msg, p...)
			if fin && msgOp == opText {
				return msg, nil
			}
		default:
			return nil, errProtocol
		}
	}
}

// newControl is a control frame of op carrying p (at most 125 bytes).
func newControl(op byte, p []byte) message {
	m := newMessage(append(make([]byte, messageHead, messageHead+len(p)), p...))
	m.frame[0] = 0x80 | op
	return m
}
