package tabsock

import (
	"bytes"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// loopConn serves one frame's bytes over and over and takes every write.
type loopConn struct {
	net.Conn
	frame []byte
	off   int
}

func (l *loopConn) Read(p []byte) (int, error) {
	n := copy(p, l.frame[l.off:])
	l.off = (l.off + n) % len(l.frame)
	return n, nil
}
func (l *loopConn) Write(p []byte) (int, error)     { return len(p), nil }
func (l *loopConn) SetReadDeadline(time.Time) error { return nil }
func (l *loopConn) Close() error                    { return nil }

// maskedFrame is a client's frame: FIN, op, masked with a fixed key.
func maskedFrame(op byte, p []byte) []byte {
	out := []byte{0x80 | op}
	switch n := len(p); {
	case n < 126:
		out = append(out, 0x80|byte(n))
	case n <= 0xffff:
		out = append(out, 0x80|126, byte(n>>8), byte(n))
	default:
		panic("long frame")
	}
	key := [4]byte{0x37, 0xfa, 0x21, 0x3d}
	out = append(out, key[:]...)
	for i, b := range p {
		out = append(out, b^key[i&3])
	}
	return out
}

// typical is a 1 KiB client message: JSON text with some non-ASCII (the
// slow case of utf8.Valid); ascii is one of plain ASCII.
var (
	typical = []byte(`{"type":"control","op":"start","id":"c1","message":"` + strings.Repeat("résumé the run, ", 60)[:960] + `"}`)
	ascii   = []byte(`{"type":"control","op":"start","id":"c1","message":"` + strings.Repeat("resume the run, ", 60)[:960] + `"}`)
)

// BenchmarkUTF8 sets what the UTF-8 check costs (utf8.Valid of a 1 KiB
// message) beside the read of that message (ReadMessage, which checks it:
// ns/op of the two, docs/protocol.md §7.3).
func BenchmarkUTF8(b *testing.B) {
	if !utf8.Valid(typical) || len(typical) < 1000 {
		b.Fatal("the typical message is not 1 KiB of UTF-8")
	}
	for name, m := range map[string][]byte{"utf8.Valid-1KiB": typical, "utf8.Valid-1KiB-ascii": ascii} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(m)))
			for b.Loop() {
				if !utf8.Valid(m) {
					b.Fatal("invalid")
				}
			}
		})
	}
	b.Run("ReadMessage-1KiB", func(b *testing.B) {
		c := NewConn(&loopConn{frame: maskedFrame(opText, typical)}, Options{ReadLimit: 1 << 20})
		b.SetBytes(int64(len(typical)))
		b.ReportAllocs()
		for b.Loop() {
			if _, p, err := c.ReadMessage(); err != nil || !bytes.Equal(p, typical) {
				b.Fatal(err)
			}
		}
	})
	// What the hub does next with the message: decode its JSON.
	b.Run("json.Unmarshal-1KiB", func(b *testing.B) {
		var m struct{ Type, Op, ID, Message string }
		b.SetBytes(int64(len(typical)))
		for b.Loop() {
			if err := json.Unmarshal(typical, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
