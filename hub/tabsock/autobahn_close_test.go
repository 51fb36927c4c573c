package tabsock_test

import (
	"fmt"
	"strings"
)

// Section 7 of the Autobahn|Testsuite: the closing handshake and close
// codes.
func closeCases() []abCase {
	var cs []abCase
	add := func(c abCase) { cs = append(cs, c) }
	hello := []byte("Hello World!")
	// 7.1 Basic close behaviour: nothing after the client's close is
	// answered.
	add(abCase{id: "7.1.1", what: "text, then close", send: cat(clientFrame(0x81, hello), closeFrame(1000, "")), closes: true, want: []srvFrame{text("Hello World!")}, close: 1000})
	add(abCase{id: "7.1.2", what: "close twice", send: cat(closeFrame(1000, ""), closeFrame(1000, "")), closes: true, close: 1000})
	add(abCase{id: "7.1.3", what: "close, then ping", send: cat(closeFrame(1000, ""), clientFrame(0x89, hello)), closes: true, close: 1000})
	add(abCase{id: "7.1.4", what: "close, then text", send: cat(closeFrame(1000, ""), clientFrame(0x81, hello)), closes: true, close: 1000})
	add(abCase{id: "7.1.5", what: "text fragment, close, continuation", send: cat(clientFrame(0x01, []byte("fragment1")), closeFrame(1000, ""), clientFrame(0x80, []byte("fragment2"))), closes: true, close: 1000})
	big := strings.Repeat("BAsd7&jh23", 256<<10/10+1)[:256<<10]
	add(abCase{id: "7.1.6", what: "256 KiB text, text, close, ping (INFORMATIONAL: both read before the close)", send: cat(clientFrame(0x81, []byte(big)), clientFrame(0x81, hello), closeFrame(1000, ""), clientFrame(0x89, nil)), closes: true, want: []srvFrame{text(big), text("Hello World!")}, close: 1000})
	// 7.3 Close frame structure: payload length.
	add(abCase{id: "7.3.1", what: "close without payload: an empty close back", send: closeFrame(-1, ""), closes: true, close: 1005})
	add(abCase{id: "7.3.2", what: "close with a 1-byte payload", send: clientFrame(0x88, []byte{0x03}), closes: true, close: 1002})
	add(abCase{id: "7.3.3", what: "close 1000, no reason", send: closeFrame(1000, ""), closes: true, close: 1000})
	add(abCase{id: "7.3.4", what: "close 1000 with a reason", send: closeFrame(1000, "Hello World!"), closes: true, close: 1000})
	add(abCase{id: "7.3.5", what: "close 1000, 123-byte reason", send: closeFrame(1000, strings.Repeat("*", 123)), closes: true, close: 1000})
	add(abCase{id: "7.3.6", what: "close 1000, 124-byte reason (a 126-byte control frame)", send: closeFrame(1000, strings.Repeat("*", 124)), closes: true, close: 1002})
	// 7.5 The close reason must be UTF-8 (the package does not echo it).
	add(abCase{id: "7.5.1", what: "close reason not UTF-8", send: closeFrame(1000, kosme+"\xed\xa0\x80edited"), closes: true, close: 1007})
	// 7.7 Valid close codes are echoed.
	for i, code := range []int{1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999} {
		add(abCase{id: fmt.Sprintf("7.7.%d", i+1), what: fmt.Sprintf("valid close code %d", code), send: closeFrame(code, ""), closes: true, close: code})
	}
	// 7.9 Invalid close codes fail the connection.
	for i, code := range []int{0, 999, 1004, 1005, 1006, 1016, 1100, 2000, 2999} {
		add(abCase{id: fmt.Sprintf("7.9.%d", i+1), what: fmt.Sprintf("invalid close code %d", code), send: closeFrame(code, ""), closes: true, close: 1002})
	}
	// 7.13 Codes the spec leaves undefined (INFORMATIONAL): 1002 here.
	add(abCase{id: "7.13.1", what: "close code 5000", send: closeFrame(5000, ""), closes: true, close: 1002})
	add(abCase{id: "7.13.2", what: "close code 65535", send: closeFrame(65535, ""), closes: true, close: 1002})
	return cs
}
