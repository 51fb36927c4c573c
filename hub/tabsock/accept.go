package tabsock

import (
	"bytes"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// wsGUID is RFC 6455's key suffix for Sec-WebSocket-Accept.
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// Accept checks a WebSocket upgrade request and answers it: 101 with the
// subprotocol chosen (the client's spelling of the first of
// opts.Subprotocols it offers; "" when none), then the connection is
// taken over with a ReadBuffer-sized reader. A bad request gets the HTTP
// error coder/websocket's Accept answers; a ResponseWriter that cannot
// hijack (following Unwrap, as http.ResponseController does) gets 501
// before the 101 is set. No compression extension is negotiated. On an
// error the answer has been written.
func Accept(w http.ResponseWriter, r *http.Request, opts Options) (*Conn, string, error) {
	if code, err := checkUpgrade(w.Header(), r); err != nil {
		http.Error(w, err.Error(), code)
		return nil, "", err
	}
	hj, ok := hijacker(w)
	if !ok {
		http.Error(w, http.StatusText(http.StatusNotImplemented), http.StatusNotImplemented)
		return nil, "", errors.New("http.ResponseWriter does not implement http.Hijacker")
	}
	h := w.Header()
	h.Set("Upgrade", "websocket")
	h.Set("Connection", "Upgrade")
	h.Set("Sec-WebSocket-Accept", acceptKey(r.Header.Get("Sec-WebSocket-Key")))
	proto := pickSubprotocol(r.Header, opts.Subprotocols)
	if proto != "" {
		h.Set("Sec-WebSocket-Protocol", proto)
	}
	w.WriteHeader(http.StatusSwitchingProtocols)
	c, err := hijack(hj, opts)
	if err != nil {
		err = fmt.Errorf("failed to hijack connection: %w", err)
		http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
		return nil, "", err
	}
	return c, proto, nil
}

// hijacker returns the Hijacker of w, following Unwrap as
// http.ResponseController does.
func hijacker(w http.ResponseWriter) (http.Hijacker, bool) {
	for {
		switch t := w.(type) {
		case http.Hijacker:
			return t, true
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return nil, false
		}
	}
}

// hijack takes the connection over once the upgrade's answer is set
// (net/http writes it as it hands the connection over).
func hijack(hj http.Hijacker, opts Options) (*Conn, error) {
	conn, brw, err := hj.Hijack()
	if err != nil {
		return nil, err
	}
	// net/http has written the upgrade's answer (Hijack flushes it); what
	// is left in its writer would be nothing, but send it all the same.
	if err := brw.Writer.Flush(); err != nil {
		conn.Close()
		return nil, err
	}
	if n := brw.Reader.Buffered(); n > 0 {
		// Bytes read ahead of the upgrade (net/http's background read can
		// take the start of the first frame) come first.
		b, _ := brw.Reader.Peek(n)
		conn = &prefixConn{Conn: conn, prefix: bytes.Clone(b)}
	}
	return NewConn(conn, opts), nil
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

// pickSubprotocol returns the client's spelling of the first of ours it
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
