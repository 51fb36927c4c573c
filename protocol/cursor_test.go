package protocol_test

import (
	"strings"
	"testing"

	"github.com/runhub/runhub/protocol"
)

func TestParseCursor(t *testing.T) {
	id128 := strings.Repeat("r", protocol.MaxIDLen)
	valid := []struct {
		in   string
		want protocol.Cursor
	}{
		{"r1:1", protocol.Cursor{RunID: "r1", Seq: 1}},
		{"r_01J.ab-CD:42", protocol.Cursor{RunID: "r_01J.ab-CD", Seq: 42}},
		{"r:0", protocol.Cursor{RunID: "r", Seq: 0}},
		{"r:18446744073709551615", protocol.Cursor{RunID: "r", Seq: 1<<64 - 1}},
		{id128 + ":7", protocol.Cursor{RunID: id128, Seq: 7}},
	}
	for _, tt := range valid {
		got, err := protocol.ParseCursor(tt.in)
		if err != nil {
			t.Errorf("ParseCursor(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseCursor(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
		if s := got.String(); s != tt.in {
			t.Errorf("ParseCursor(%q).String() = %q", tt.in, s)
		}
	}

	invalid := []string{
		"", ":", "r1", "r1:", ":1", "::1", "r1::1", "a:b:1",
		"r1:01", "r1:00", "r1:+1", "r1:-1", "r1: 1", "r1:1 ", " r1:1", "r1:1\n",
		"r1:1.0", "r1:1e3", "r1:0x10", "r1:1_000", "r1:18446744073709551616", "r1:99999999999999999999999",
		"r 1:1", "r/1:1", "r\x001:1", "рун:1", "r1:١", id128 + "r:1",
	}
	for _, in := range invalid {
		c, err := protocol.ParseCursor(in)
		if err == nil {
			t.Errorf("ParseCursor(%q) = %+v, want an error", in, c)
			continue
		}
		pe := wantError(t, err, protocol.CodeBadCursor, "")
		if !strings.Contains(pe.Message, "cursor") {
			t.Errorf("ParseCursor(%q): message %q does not say cursor", in, pe.Message)
		}
		if c != (protocol.Cursor{}) {
			t.Errorf("ParseCursor(%q) returned %+v with its error", in, c)
		}
	}
}

func TestCursor_RoundTrip(t *testing.T) {
	for _, c := range []protocol.Cursor{
		{RunID: "r1", Seq: 0}, {RunID: "r1", Seq: 1}, {RunID: "R-9_x.y", Seq: 1234567890},
		{RunID: "r", Seq: 1<<64 - 1},
	} {
		got, err := protocol.ParseCursor(c.String())
		if err != nil || got != c {
			t.Errorf("ParseCursor(%q) = %+v, %v; want %+v", c.String(), got, err, c)
		}
	}
}

func TestEventID(t *testing.T) {
	if got := protocol.EventID("r_01J", 42); got != "r_01J:42" {
		t.Errorf("EventID = %q", got)
	}
	e := protocol.Envelope{RunID: "r1", Seq: 9}
	if got := e.Cursor(); got != (protocol.Cursor{RunID: "r1", Seq: 9}) || got.String() != "r1:9" {
		t.Errorf("Envelope.Cursor = %+v", got)
	}
}

func TestValidID(t *testing.T) {
	for _, s := range []string{"a", "s_01J", "A-z.0_9", strings.Repeat("x", protocol.MaxIDLen)} {
		if err := protocol.ValidID(s); err != nil {
			t.Errorf("ValidID(%q): %v", s, err)
		}
	}
	wantError(t, protocol.ValidID(""), protocol.CodeBadRequest, "")
	wantError(t, protocol.ValidID(strings.Repeat("x", protocol.MaxIDLen+1)), protocol.CodeTooLarge, "")
	for _, s := range []string{"a b", "a:b", "a/b", "é", "a\n", "a+b", "a@b"} {
		wantError(t, protocol.ValidID(s), protocol.CodeBadRequest, "")
	}
}

func TestTruncate(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijk", 5, "abcde…"},
		{"héllo", 2, "h…"}, // é is 2 bytes: never cut in half
		{"日本語", 4, "日…"},   // 3-byte runes
		{"日本語", 6, "日本…"},
		{"", 0, ""},
	} {
		if got := protocol.Truncate(c.in, c.n); got != c.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
