package tabsock_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/runhub/runhub/hub/tabsock"
)

// The Autobahn|Testsuite's cases of sections 1 to 7 (framing, pings and
// pongs, reserved bits, opcodes, fragmentation, UTF-8, close), by their
// case numbers, against the package's reader and writer with an echo loop
// (echo_test.go): the suite's fuzzing client needs Python 2, which the
// registries here do not serve, so its cases are written down here as
// the suite describes them. The hub is not an echo server; the echo loop
// is the test's, as the suite's own server under test would be.
//
// What does not apply, and why (docs/protocol.md §7.3):
//   - the suite's waits (5.19, 5.20 and 6.4.x send with pauses of a
//     second; here the bytes go at once: the reader's answer does not
//     depend on them);
//   - 6.4.1-6.4.4 ask to fail fast, at the fragment that makes the text
//     invalid; the package fails at the message's end (the suite grades
//     that NON-STRICT, a pass): 1007 either way;
//   - 7.1.6, 7.13.1 and 7.13.2 are INFORMATIONAL in the suite (any
//     outcome passes); the table records what the package does;
//   - sections 9 and 10 (performance, auto-fragmentation), 12 and 13
//     (permessage-deflate, which the package does not negotiate) are out
//     of the scope.

// srvFrame is a frame the server sends back: its first byte and payload.
type srvFrame struct {
	b0      byte
	payload string
}

// abCase is one case: what the client sends (chopped into writes of chop
// bytes, 0: one write), the frames it must get back, and the close code
// of the server's close frame. Unless the case sends its own close frame
// (closes), a case that wants 1000 sends the closing close (1000) after
// its frames, as the suite's client does; a case that wants another code
// is one where the server fails the connection.
type abCase struct {
	id, what string
	send     []byte
	chop     int
	want     []srvFrame
	close    int
	closes   bool
}

func text(s string) srvFrame   { return srvFrame{0x81, s} }
func binMsg(s string) srvFrame { return srvFrame{0x82, s} }
func pong(s string) srvFrame   { return srvFrame{0x8a, s} }

func cat(frames ...[]byte) []byte { return bytes.Join(frames, nil) }

// closeFrame is a client's close frame with code (-1: none) and reason.
func closeFrame(code int, reason string) []byte {
	if code < 0 {
		return clientFrame(0x88, nil)
	}
	return clientFrame(0x88, append([]byte{byte(code >> 8), byte(code)}, reason...))
}

// octets is payload sent as a message of one frame per octet.
func octets(op byte, payload string) []byte {
	var out []byte
	for i := range len(payload) {
		b0 := byte(0x00)
		if i == 0 {
			b0 = op
		}
		if i == len(payload)-1 {
			b0 |= 0x80
		}
		out = append(out, clientFrame(b0, []byte{payload[i]})...)
	}
	return out
}

func autobahnCases() []abCase {
	var cs []abCase
	add := func(c abCase) { cs = append(cs, c) }
	// 1 Framing: text (1.1.x) and binary (1.2.x) messages of the lengths
	// around each header form; 1.x.8 sends 65536 bytes in chops of 997.
	for i, n := range []int{0, 125, 126, 127, 128, 65535, 65536, 65536} {
		chop := 0
		if i == 7 {
			chop = 997
		}
		tp := strings.Repeat("*", n)
		bp := strings.Repeat("\xfe", n)
		add(abCase{id: fmt.Sprintf("1.1.%d", i+1), what: fmt.Sprintf("text, %d bytes", n), send: clientFrame(0x81, []byte(tp)), chop: chop, want: []srvFrame{text(tp)}, close: 1000})
		add(abCase{id: fmt.Sprintf("1.2.%d", i+1), what: fmt.Sprintf("binary, %d bytes", n), send: clientFrame(0x82, []byte(bp)), chop: chop, want: []srvFrame{binMsg(bp)}, close: 1000})
	}
	// 2 Pings and pongs.
	p125 := strings.Repeat("\xfe", 125)
	add(abCase{id: "2.1", what: "ping, no payload", send: clientFrame(0x89, nil), want: []srvFrame{pong("")}, close: 1000})
	add(abCase{id: "2.2", what: "ping, small text payload", send: clientFrame(0x89, []byte("Hello, world!")), want: []srvFrame{pong("Hello, world!")}, close: 1000})
	add(abCase{id: "2.3", what: "ping, small binary payload", send: clientFrame(0x89, []byte("\x00\xff\xfe\xfd\xfc\xfb\x00\xff")), want: []srvFrame{pong("\x00\xff\xfe\xfd\xfc\xfb\x00\xff")}, close: 1000})
	add(abCase{id: "2.4", what: "ping, 125 bytes", send: clientFrame(0x89, []byte(p125)), want: []srvFrame{pong(p125)}, close: 1000})
	add(abCase{id: "2.5", what: "ping, 126 bytes", send: clientFrame(0x89, []byte(p125+"\xfe")), close: 1002})
	add(abCase{id: "2.6", what: "ping, 125 bytes, in chops of 1", send: clientFrame(0x89, []byte(p125)), chop: 1, want: []srvFrame{pong(p125)}, close: 1000})
	add(abCase{id: "2.7", what: "unsolicited pong, no payload", send: clientFrame(0x8a, nil), close: 1000})
	add(abCase{id: "2.8", what: "unsolicited pong with payload", send: clientFrame(0x8a, []byte("unsolicited pong payload")), close: 1000})
	add(abCase{id: "2.9", what: "unsolicited pong, then ping", send: cat(clientFrame(0x8a, []byte("unsolicited pong payload")), clientFrame(0x89, []byte("ping payload"))), want: []srvFrame{pong("ping payload")}, close: 1000})
	var pings []byte
	var pongs []srvFrame
	for i := range 10 {
		s := fmt.Sprintf("payload-%d", i)
		pings = append(pings, clientFrame(0x89, []byte(s))...)
		pongs = append(pongs, pong(s))
	}
	add(abCase{id: "2.10", what: "10 pings", send: pings, want: pongs, close: 1000})
	add(abCase{id: "2.11", what: "10 pings, in chops of 1", send: pings, chop: 1, want: pongs, close: 1000})
	// 3 Reserved bits: each of RSV 1-7 fails the connection (1002); a
	// text before it is echoed, a ping after it is not answered.
	hello := []byte("Hello, world!")
	add(abCase{id: "3.1", what: "text, RSV = 1", send: clientFrame(0x81|0x40, hello), close: 1002})
	add(abCase{id: "3.2", what: "text, text RSV = 2, ping", send: cat(clientFrame(0x81, hello), clientFrame(0x81|0x20, hello), clientFrame(0x89, nil)), want: []srvFrame{text("Hello, world!")}, close: 1002})
	add(abCase{id: "3.3", what: "text, text RSV = 3, ping, framewise", send: cat(clientFrame(0x81, hello), clientFrame(0x81|0x60, hello), clientFrame(0x89, nil)), want: []srvFrame{text("Hello, world!")}, close: 1002})
	add(abCase{id: "3.4", what: "text, text RSV = 4, ping, in chops of 1", send: cat(clientFrame(0x81, hello), clientFrame(0x81|0x10, hello), clientFrame(0x89, nil)), chop: 1, want: []srvFrame{text("Hello, world!")}, close: 1002})
	add(abCase{id: "3.5", what: "binary, RSV = 5", send: clientFrame(0x82|0x50, []byte("\x00\xff\xfe\xfd\xfc\xfb\x00\xff")), close: 1002})
	add(abCase{id: "3.6", what: "ping, RSV = 6", send: clientFrame(0x89|0x60, hello), close: 1002})
	add(abCase{id: "3.7", what: "close, RSV = 7", send: clientFrame(0x88|0x70, nil), close: 1002})
	// 4 Opcodes: reserved non-control (3-7, 4.1.x) and control (11-15,
	// 4.2.x) opcodes fail the connection.
	for sec, ops := range [][]byte{{3, 4, 5, 6, 7}, {11, 12, 13, 14, 15}} {
		for j, op := range ops {
			id := fmt.Sprintf("4.%d.%d", sec+1, j+1)
			switch j {
			case 0:
				add(abCase{id: id, what: fmt.Sprintf("opcode %d", op), send: clientFrame(0x80|op, nil), close: 1002})
			case 1:
				add(abCase{id: id, what: fmt.Sprintf("opcode %d with payload", op), send: clientFrame(0x80|op, []byte("reserved opcode payload")), close: 1002})
			default:
				c := abCase{id: id, what: fmt.Sprintf("text, opcode %d, ping", op), send: cat(clientFrame(0x81, hello), clientFrame(0x80|op, []byte("reserved opcode payload")[:min(j-2, 1)*23]), clientFrame(0x89, nil)), want: []srvFrame{text("Hello, world!")}, close: 1002}
				if j == 4 {
					c.chop = 1
				}
				add(c)
			}
		}
	}
	// 5 Fragmentation.
	frag1, frag2 := []byte("fragment1"), []byte("fragment2")
	add(abCase{id: "5.1", what: "ping in 2 fragments", send: cat(clientFrame(0x09, frag1), clientFrame(0x80, frag2)), close: 1002})
	add(abCase{id: "5.2", what: "pong in 2 fragments", send: cat(clientFrame(0x0a, frag1), clientFrame(0x80, frag2)), close: 1002})
	twoFrags := cat(clientFrame(0x01, frag1), clientFrame(0x80, frag2))
	add(abCase{id: "5.3", what: "text in 2 fragments", send: twoFrags, want: []srvFrame{text("fragment1fragment2")}, close: 1000})
	add(abCase{id: "5.4", what: "text in 2 fragments, framewise", send: twoFrags, chop: 15, want: []srvFrame{text("fragment1fragment2")}, close: 1000})
	add(abCase{id: "5.5", what: "text in 2 fragments, in chops of 1", send: twoFrags, chop: 1, want: []srvFrame{text("fragment1fragment2")}, close: 1000})
	withPing := cat(clientFrame(0x01, frag1), clientFrame(0x89, []byte("pongme!")), clientFrame(0x80, frag2))
	for i, chop := range []int{0, 15, 1} {
		add(abCase{id: fmt.Sprintf("5.%d", 6+i), what: "text in 2 fragments, a ping between", send: withPing, chop: chop, want: []srvFrame{pong("pongme!"), text("fragment1fragment2")}, close: 1000})
	}
	nothing := cat(clientFrame(0x80, []byte("fragment1")), clientFrame(0x01, []byte("fragment2")), clientFrame(0x80, []byte("fragment3")))
	for i, chop := range []int{0, 15, 1} {
		add(abCase{id: fmt.Sprintf("5.%d", 9+i), what: "continuation FIN, nothing to continue", send: nothing, chop: chop, close: 1002})
	}
	nothing2 := cat(clientFrame(0x00, []byte("fragment1")), clientFrame(0x01, []byte("fragment2")), clientFrame(0x80, []byte("fragment3")))
	for i, chop := range []int{0, 15, 1} {
		add(abCase{id: fmt.Sprintf("5.%d", 12+i), what: "continuation without FIN, nothing to continue", send: nothing2, chop: chop, close: 1002})
	}
	add(abCase{id: "5.15", what: "text in 2 fragments, then a continuation with nothing to continue", send: cat(clientFrame(0x01, frag1), clientFrame(0x80, frag2), clientFrame(0x00, []byte("fragment3")), clientFrame(0x81, []byte("fragment4"))), want: []srvFrame{text("fragment1fragment2")}, close: 1002})
	add(abCase{id: "5.16", what: "twice: continuation, text fragment, continuation FIN", send: bytes.Repeat(cat(clientFrame(0x00, frag1), clientFrame(0x01, frag2), clientFrame(0x80, []byte("fragment3"))), 2), close: 1002})
	add(abCase{id: "5.17", what: "twice: continuation FIN, text fragment, continuation FIN", send: bytes.Repeat(cat(clientFrame(0x80, frag1), clientFrame(0x01, frag2), clientFrame(0x80, []byte("fragment3"))), 2), close: 1002})
	add(abCase{id: "5.18", what: "text in 2 fragments, both opcode text", send: cat(clientFrame(0x01, frag1), clientFrame(0x81, frag2)), close: 1002})
	five := cat(clientFrame(0x01, []byte("fragment1")), clientFrame(0x00, []byte("fragment2")), clientFrame(0x89, []byte("pongme 1!")),
		clientFrame(0x00, []byte("fragment3")), clientFrame(0x00, []byte("fragment4")), clientFrame(0x89, []byte("pongme 2!")), clientFrame(0x80, []byte("fragment5")))
	fiveWant := []srvFrame{pong("pongme 1!"), pong("pongme 2!"), text("fragment1fragment2fragment3fragment4fragment5")}
	add(abCase{id: "5.19", what: "text in 5 fragments, 2 pings between", send: five, want: fiveWant, close: 1000})
	add(abCase{id: "5.20", what: "text in 5 fragments, 2 pings between, framewise", send: five, chop: 17, want: fiveWant, close: 1000})
	cs = append(cs, utf8Cases()...)
	cs = append(cs, closeCases()...)
	return cs
}

// TestAutobahn runs the table: every case by its number.
func TestAutobahn(t *testing.T) {
	cases := autobahnCases()
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.id] {
			t.Fatalf("case %s twice", c.id)
		}
		seen[c.id] = true
		t.Run(c.id, func(t *testing.T) {
			p := echoPeer(t, tabsock.Options{ReadLimit: 16 << 20})
			send := c.send
			if c.chop > 0 {
				for len(send) > c.chop {
					p.send(send[:c.chop])
					send = send[c.chop:]
				}
			}
			p.send(send)
			if c.close == 1000 && !c.closes {
				p.send(closeFrame(1000, ""))
			}
			var got []srvFrame
			for {
				op, payload, ok := p.next()
				if !ok {
					t.Fatalf("%s: the connection ended without a close frame after %d frames", c.what, len(got))
				}
				if op&0x0f == 0x8 {
					code := 1005
					if len(payload) >= 2 {
						code = int(payload[0])<<8 | int(payload[1])
					}
					if code != c.close {
						t.Fatalf("%s: close %d %q, want %d", c.what, code, payload[min(2, len(payload)):], c.close)
					}
					break
				}
				got = append(got, srvFrame{op, string(payload)})
			}
			if len(got) != len(c.want) {
				t.Fatalf("%s: %d frames back, want %d", c.what, len(got), len(c.want))
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("%s: frame %d is %x %.40q, want %x %.40q", c.what, i, got[i].b0, got[i].payload, c.want[i].b0, c.want[i].payload)
				}
			}
			p.drain() // the server closes the connection after its close frame
		})
	}
	if n := len(cases); n != 246 {
		t.Fatalf("%d cases in sections 1-7, want 246", n)
	}
}
