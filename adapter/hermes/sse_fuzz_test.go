package hermes

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// parseSSE runs readSSE over body and returns its items and why it stopped.
func parseSSE(body []byte) ([]item, error) {
	out := make(chan item, len(body)+2) // at most one item per line
	err := readSSE(context.Background(), bytes.NewReader(body), out)
	close(out)
	var items []item
	for it := range out {
		items = append(items, it)
	}
	return items, err
}

// FuzzReadSSE: no body makes the Hermes SSE reader panic or hang; it stops
// only at the end of the body (clean or mid-line); and the frames it
// dispatches, written back as SSE, parse to the same frames.
func FuzzReadSSE(f *testing.F) {
	for _, s := range []string{
		"event: run.event\ndata: {\"type\":\"token\",\"text\":\"hi\"}\n\n",
		": keepalive\n\n",
		"data: a\ndata: b\n\ndata: c\n\n",
		"data:x\r\n\r\n",
		"id: 7\nretry: 100\nevent: done\ndata: {}\n\n",
		"bogus line\n\ndata: after\n\n",
		"data: cut off",
		"data:  two spaces\n\n",
		"event: e\n\n",
		"\n\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		items, err := parseSSE(body)
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("readSSE stopped with %v", err)
		}
		var again bytes.Buffer
		for _, it := range items {
			if it.comment {
				again.WriteString(":" + string(it.data) + "\n")
				continue
			}
			if it.name != "" {
				again.WriteString("event: " + it.name + "\n")
			}
			for _, line := range bytes.Split(it.data, []byte("\n")) {
				again.WriteString("data: " + string(line) + "\n")
			}
			again.WriteString("\n")
		}
		round, err := parseSSE(again.Bytes())
		if !errors.Is(err, io.EOF) {
			t.Fatalf("re-encoded frames stopped with %v:\n%q", err, again.Bytes())
		}
		if len(round) != len(items) {
			t.Fatalf("%d frames became %d:\n%q\n%q", len(items), len(round), body, again.Bytes())
		}
		for i := range items {
			a, b := items[i], round[i]
			if a.comment != b.comment || a.name != b.name || !bytes.Equal(a.data, b.data) {
				t.Fatalf("frame %d: %+v became %+v", i, a, b)
			}
		}
	})
}

// A stream whose lines end in a bare CR (which the SSE specification
// allows), or mix CR, LF and CRLF, parses as the same frames as one in LF.
func TestReadSSEBareCR(t *testing.T) {
	lf := "event: run.event\ndata: {\"a\":1}\n\n: ping\n\ndata: x\ndata: y\n\n"
	for _, body := range []string{
		strings.ReplaceAll(lf, "\n", "\r"),
		strings.ReplaceAll(lf, "\n", "\r\n"),
		"event: run.event\rdata: {\"a\":1}\r\n\n: ping\n\rdata: x\r\ndata: y\r\r",
	} {
		items, err := parseSSE([]byte(body))
		if !errors.Is(err, io.EOF) {
			t.Fatalf("%q: stopped with %v", body, err)
		}
		want := []item{{name: "run.event", data: []byte(`{"a":1}`)}, {comment: true, data: []byte("ping")}, {data: []byte("x\ny")}}
		if len(items) != len(want) {
			t.Fatalf("%q: %d frames %+v, want %d", body, len(items), items, len(want))
		}
		for i := range want {
			if items[i].comment != want[i].comment || items[i].name != want[i].name || !bytes.Equal(items[i].data, want[i].data) {
				t.Errorf("%q: frame %d = %+v, want %+v", body, i, items[i], want[i])
			}
		}
	}
}
