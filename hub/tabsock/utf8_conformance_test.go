package tabsock_test

import (
	"testing"

	"github.com/runhub/runhub/hub/tabsock"
)

// RFC 6455 §8.1: a text message that is not UTF-8, whole or in fragments,
// fails the connection with 1007, and so does a close reason that is not
// (which is not echoed). Binary messages are not checked.
func TestUTF8_InvalidFails1007(t *testing.T) {
	bad := []byte("caf\xc3") // a cut 2-byte sequence
	cases := []struct {
		name string
		send func(p *peer)
		want int
	}{
		{"text", func(p *peer) { p.frame(0x81, bad) }, 1007},
		{"text in fragments, valid in each but not whole", func(p *peer) {
			p.frame(0x01, []byte("caf\xc3"))
			p.frame(0x80, []byte("\xa9\xff"))
		}, 1007},
		{"a surrogate (ED A0 80)", func(p *peer) { p.frame(0x81, []byte("\xed\xa0\x80")) }, 1007},
		{"a close reason", func(p *peer) { p.frame(0x88, append([]byte{0x03, 0xe8}, bad...)) }, 1007},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := echoPeer(t, tabsock.Options{ReadLimit: 1 << 20})
			tc.send(p)
			if code, reason := p.closed(); code != tc.want {
				t.Fatalf("close %d %q, want %d", code, reason, tc.want)
			}
		})
	}
	t.Run("valid text split inside a character is one message", func(t *testing.T) {
		p := echoPeer(t, tabsock.Options{ReadLimit: 1 << 20})
		p.frame(0x01, []byte("caf\xc3"))
		p.frame(0x80, []byte("\xa9"))
		if op, got, ok := p.next(); !ok || op != 0x81 || string(got) != "café" {
			t.Fatalf("echo %x %q %v", op, got, ok)
		}
	})
	t.Run("binary is not checked", func(t *testing.T) {
		p := echoPeer(t, tabsock.Options{ReadLimit: 1 << 20})
		p.frame(0x82, bad)
		if op, got, ok := p.next(); !ok || op != 0x82 || string(got) != string(bad) {
			t.Fatalf("echo %x %q %v", op, got, ok)
		}
	})
}
