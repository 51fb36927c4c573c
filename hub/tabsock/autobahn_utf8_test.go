package tabsock_test

import (
	"fmt"
	"strings"
)

// Section 6 of the Autobahn|Testsuite: UTF-8 handling. A valid text
// message is echoed; an invalid one fails the connection with 1007.

const kosme = "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5" // κόσμε

// utf8Seq is one of the suite's UTF-8 test sequences (after Markus Kuhn's
// UTF-8 decoder test): its payload and whether it is valid.
type utf8Seq struct {
	valid   bool
	payload string
}

func utf8Cases() []abCase {
	var cs []abCase
	echoed := func(id, what string, send []byte, chop int, msg string) {
		cs = append(cs, abCase{id: id, what: what, send: send, chop: chop, want: []srvFrame{text(msg)}, close: 1000})
	}
	failed := func(id, what string, send []byte, chop int) {
		cs = append(cs, abCase{id: id, what: what, send: send, chop: chop, close: 1007})
	}
	// 6.1 Empty messages and fragments.
	echoed("6.1.1", "empty text", clientFrame(0x81, nil), 0, "")
	echoed("6.1.2", "3 empty fragments", cat(clientFrame(0x01, nil), clientFrame(0x00, nil), clientFrame(0x80, nil)), 0, "")
	echoed("6.1.3", "empty, non-empty, empty fragments", cat(clientFrame(0x01, nil), clientFrame(0x00, []byte("middle frame payload")), clientFrame(0x80, nil)), 0, "middle frame payload")
	// 6.2 Valid UTF-8, whole, on a code point boundary, and in fragments
	// of 1 octet (so frames end inside code points).
	const hello = "Hello-\xc2\xb5@\xc3\x9f\xc3\xb6\xc3\xa4\xc3\xbc\xc3\xa0\xc3\xa1-UTF-8!!"
	echoed("6.2.1", "valid text, one fragment", clientFrame(0x81, []byte(hello)), 0, hello)
	echoed("6.2.2", "valid text, 2 fragments on a code point boundary", cat(clientFrame(0x01, []byte(hello[:11])), clientFrame(0x80, []byte(hello[11:]))), 0, hello)
	echoed("6.2.3", "valid text, fragments of 1 octet", octets(0x01, hello), 0, hello)
	echoed("6.2.4", "valid text (κόσμε), fragments of 1 octet", octets(0x01, kosme), 0, kosme)
	// 6.3 Invalid UTF-8 (a surrogate, ED A0 80), whole and in octets.
	bad := kosme + "\xed\xa0\x80edited"
	failed("6.3.1", "invalid text", clientFrame(0x81, []byte(bad)), 0)
	failed("6.3.2", "invalid text, fragments of 1 octet", octets(0x01, bad), 0)
	// 6.4 Fail fast (the package fails at the message's end: NON-STRICT).
	failed("6.4.1", "invalid text in 3 fragments, the 2nd making it invalid", cat(clientFrame(0x01, []byte(kosme)), clientFrame(0x00, []byte("\xf4\x90\x80\x80")), clientFrame(0x80, []byte("edited"))), 0)
	failed("6.4.2", "invalid text in 3 fragments, the 2nd 1 byte making it invalid", cat(clientFrame(0x01, []byte(kosme+"\xf4")), clientFrame(0x00, []byte("\x90")), clientFrame(0x80, []byte("\x80\x80edited"))), 0)
	one := clientFrame(0x81, []byte(kosme+"\xf4\x90\x80\x80edited"))
	failed("6.4.3", "invalid text in one frame sent in 3 chops", one, 17)
	failed("6.4.4", "invalid text in one frame sent in chops, the invalid byte alone", one, 1)
	// 6.5-6.23: the suite's UTF-8 sequences, each a text message of one
	// frame, numbered 6.<category>.<n> in the suite's order.
	for i, cat := range utf8Categories() {
		for j, seq := range cat {
			id := fmt.Sprintf("6.%d.%d", 5+i, j+1)
			if seq.valid {
				echoed(id, fmt.Sprintf("valid % x", seq.payload), clientFrame(0x81, []byte(seq.payload)), 0, seq.payload)
			} else {
				failed(id, fmt.Sprintf("invalid % x", seq.payload), clientFrame(0x81, []byte(seq.payload)), 0)
			}
		}
	}
	return cs
}

// utf8Categories are the suite's categories 6.5 to 6.23, in order.
func utf8Categories() [][]utf8Seq {
	v := func(ps ...string) []utf8Seq {
		var out []utf8Seq
		for _, p := range ps {
			out = append(out, utf8Seq{true, p})
		}
		return out
	}
	x := func(ps ...string) []utf8Seq {
		var out []utf8Seq
		for _, p := range ps {
			out = append(out, utf8Seq{false, p})
		}
		return out
	}
	// 6.6: every prefix of κόσμε; valid where it ends on a code point.
	var prefixes []utf8Seq
	for n := 1; n <= len(kosme); n++ {
		prefixes = append(prefixes, utf8Seq{n == 2 || n == 5 || n == 7 || n == 9 || n == 11, kosme[:n]})
	}
	// 6.12.8: every continuation byte 0x80-0xbe.
	var conts strings.Builder
	for b := 0x80; b < 0xbf; b++ {
		conts.WriteByte(byte(b))
	}
	// 6.13: lonely start bytes of each length, each followed by a space.
	var lonely []utf8Seq
	for _, r := range [][2]int{{0xc0, 0xdf}, {0xe0, 0xef}, {0xf0, 0xf7}, {0xf8, 0xfb}, {0xfc, 0xfd}} {
		var s strings.Builder
		for b := r[0]; b < r[1]; b++ {
			s.WriteByte(byte(b))
			s.WriteByte(' ')
		}
		lonely = append(lonely, utf8Seq{false, s.String()})
	}
	missing := []string{"\xc0", "\xe0\x80", "\xf0\x80\x80", "\xf8\x80\x80\x80", "\xfc\x80\x80\x80\x80",
		"\xdf", "\xef\xbf", "\xf7\xbf\xbf", "\xfb\xbf\xbf\xbf", "\xfd\xbf\xbf\xbf\xbf"}
	// 6.22: non-characters, valid UTF-8 (RFC 3629).
	nonchars := v("\xef\xbf\xbe", "\xef\xbf\xbf")
	for _, z1 := range []string{"\xf0", "\xf1", "\xf2", "\xf3", "\xf4"} {
		for _, z2 := range []string{"\x8f", "\x9f", "\xaf", "\xbf"} {
			if z1 == "\xf4" && z2 != "\x8f" {
				continue // past U+10FFFF
			}
			for _, z3 := range []string{"\xbe", "\xbf"} {
				if zz := z1 + z2 + "\xbf" + z3; zz != "\xf0\x8f\xbf\xbe" && zz != "\xf0\x8f\xbf\xbf" { // overlong
					nonchars = append(nonchars, utf8Seq{true, zz})
				}
			}
		}
	}
	return [][]utf8Seq{
		v("hello\x24world", "hello\xc2\xa2world", "hello\xe2\x82\xacworld", "hello\xf0\xa4\xad\xa2world", kosme), // 6.5
		prefixes, // 6.6
		v("\x00", "\xc2\x80", "\xe0\xa0\x80", "\xf0\x90\x80\x80"),                                                                             // 6.7 first of each length
		x("\xf8\x88\x80\x80\x80", "\xfc\x84\x80\x80\x80\x80"),                                                                                 // 6.8 lengths 5 and 6
		v("\x7f", "\xdf\xbf", "\xef\xbf\xbf", "\xf4\x8f\xbf\xbf"),                                                                             // 6.9 last of each length
		x("\xf7\xbf\xbf\xbf", "\xfb\xbf\xbf\xbf\xbf", "\xfd\xbf\xbf\xbf\xbf\xbf"),                                                             // 6.10 past U+10FFFF
		append(v("\xed\x9f\xbf", "\xee\x80\x80", "\xef\xbf\xbd", "\xf4\x8f\xbf\xbf"), x("\xf4\x90\x80\x80")...),                               // 6.11 boundaries
		x("\x80", "\xbf", "\x80\xbf", "\x80\xbf\x80", "\x80\xbf\x80\xbf", "\x80\xbf\x80\xbf\x80", "\x80\xbf\x80\xbf\x80\xbf", conts.String()), // 6.12
		lonely,                                // 6.13
		x(missing...),                         // 6.14 last continuation byte missing
		x(strings.Join(missing, "")),          // 6.15 their concatenation
		x("\xfe", "\xff", "\xfe\xfe\xff\xff"), // 6.16 impossible bytes
		x("\xc0\xaf", "\xe0\x80\xaf", "\xf0\x80\x80\xaf", "\xf8\x80\x80\x80\xaf", "\xfc\x80\x80\x80\x80\xaf"),             // 6.17 overlong '/'
		x("\xc1\xbf", "\xe0\x9f\xbf", "\xf0\x8f\xbf\xbf", "\xf8\x87\xbf\xbf\xbf", "\xfc\x83\xbf\xbf\xbf\xbf"),             // 6.18 maximum overlong
		x("\xc0\x80", "\xe0\x80\x80", "\xf0\x80\x80\x80", "\xf8\x80\x80\x80\x80", "\xfc\x80\x80\x80\x80\x80"),             // 6.19 overlong NUL
		x("\xed\xa0\x80", "\xed\xad\xbf", "\xed\xae\x80", "\xed\xaf\xbf", "\xed\xb0\x80", "\xed\xbe\x80", "\xed\xbf\xbf"), // 6.20 single surrogates
		x("\xed\xa0\x80\xed\xb0\x80", "\xed\xa0\x80\xed\xbf\xbf", "\xed\xad\xbf\xed\xb0\x80", "\xed\xad\xbf\xed\xbf\xbf",
			"\xed\xae\x80\xed\xb0\x80", "\xed\xae\x80\xed\xbf\xbf", "\xed\xaf\xbf\xed\xb0\x80", "\xed\xaf\xbf\xed\xbf\xbf"), // 6.21 paired surrogates
		nonchars, // 6.22
		v("\xef\xbf\xb9", "\xef\xbf\xba", "\xef\xbf\xbb", "\xef\xbf\xbc", "\xef\xbf\xbd", "\xef\xbf\xbe", "\xef\xbf\xbf"), // 6.23 specials
	}
}
