package openai

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/protocol"
)

// recorder is an emitter that keeps what a stream emits.
type recorder struct{ events []protocol.Envelope }

func (r *recorder) Emit(_ context.Context, typ protocol.EventType, payload any) (protocol.Envelope, error) {
	e, err := protocol.NewEvent("r_fuzz", "s_fuzz", typ, payload)
	if err != nil {
		return e, err
	}
	r.events = append(r.events, e)
	return e, nil
}

// readBody runs the driver's SSE reader over body, as Execute does.
func readBody(body []byte) (*recorder, *stream, error) {
	rec := &recorder{}
	d := &Driver{cfg: Config{IdleTimeout: time.Hour, Logger: slog.New(slog.DiscardHandler)}}
	s := &stream{d: d, x: rec, model: "m", idle: time.NewTimer(time.Hour), log: d.cfg.Logger}
	defer s.idle.Stop()
	err := s.read(context.Background(), bytes.NewReader(body))
	if err == nil {
		err = s.closeReasoning(context.Background())
	}
	return rec, s, err
}

// FuzzReadSSE: no body makes the openai driver's SSE reader panic, hang
// or emit a malformed event; it stops with the stream's end ([DONE], or
// the body's end with a finish reason), a driver error, or the body cut
// short; reasoning blocks open and close in order; and the text it emits,
// streamed again as chunks, reads back to the same events.
func FuzzReadSSE(f *testing.F) {
	for _, s := range []string{
		roleChunk + "\n" + reasoning("Let me ") + "\n" + content("Hel") + "\n" + content("lo") + "\n" + finishChunk + "\n" + usageChunk + "\n" + doneLine,
		": keepalive\n\n" + content("a") + content("b") + "data: [DONE]\n",
		"data: {\"choices\":[{\"index\":0,\n" + "data: \"delta\":{\"content\":\"split\"}}]}\n\n" + doneLine,
		"data: {\"error\":{\"message\":\"overloaded\"}}\n\n",
		"event: x\nid: 1\nretry: 10\ndata: {}\n\n",
		"not an sse line\n{\"raw\":\"json\"}\n",
		content("cut off") + finishChunk,
		"data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"other choice\"}}]}\n\n",
		"data: {\"choices\":[{\"index\":0,\"message\":{\"content\":\"whole\"},\"finish_reason\":\"stop\"}]}\n\n",
		"data: " + strings.Repeat("x", 70000) + "\n\n" + doneLine,
		"data:\r\n\r\ndata: [DONE]\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rec, _, err := readBody(body)
		var de *driver.Error
		var re readError
		if err != nil && !errors.As(err, &de) && !errors.As(err, &re) {
			t.Fatalf("read stopped with %T %v", err, err)
		}
		if errors.As(err, &re) && !errors.Is(re.err, io.ErrUnexpectedEOF) && !errors.Is(re.err, io.EOF) {
			t.Fatalf("read error %v from a bytes.Reader", re.err)
		}
		open := ""
		var again bytes.Buffer
		for _, e := range rec.events {
			if err := protocol.ValidateEvent(&e); err != nil {
				t.Fatalf("emitted an invalid %s %s: %v", e.Type, e.Payload, err)
			}
			switch e.Type {
			case protocol.EventTokenDelta:
				p, _ := protocol.DecodePayload[protocol.TokenDeltaPayload](&e)
				if p.Text == "" || p.MessageID != "m1" || open != "" {
					t.Fatalf("token.delta %s (reasoning block %q open)", e.Payload, open)
				}
				again.WriteString(content(p.Text) + "\n")
			case protocol.EventReasoningDelta:
				p, _ := protocol.DecodePayload[protocol.ReasoningPayload](&e)
				if p.Text == "" || (open != "" && p.BlockID != open) {
					t.Fatalf("reasoning.delta %s (block %q open)", e.Payload, open)
				}
				open = p.BlockID
				again.WriteString(reasoning(p.Text) + "\n")
			case protocol.EventReasoningDone:
				p, _ := protocol.DecodePayload[protocol.ReasoningPayload](&e)
				if open == "" || p.BlockID != open {
					t.Fatalf("reasoning.done %s (block %q open)", e.Payload, open)
				}
				open = ""
			default:
				t.Fatalf("the reader emitted %s", e.Type)
			}
		}
		if open != "" && err == nil {
			t.Fatalf("reasoning block %s left open", open)
		}
		if de != nil && !utf8.ValidString(de.Message) {
			t.Fatalf("error message is not UTF-8: %q", de.Message)
		}
		again.WriteString(doneLine)
		round, _, err := readBody(again.Bytes())
		if err != nil {
			t.Fatalf("re-streamed events: %v", err)
		}
		// (A stream that failed leaves its reasoning block open; the
		// re-streamed one ends cleanly and closes it.)
		deltas := func(evs []protocol.Envelope) []protocol.Envelope {
			var out []protocol.Envelope
			for _, e := range evs {
				if e.Type != protocol.EventReasoningDone {
					out = append(out, e)
				}
			}
			return out
		}
		first, second := deltas(rec.events), deltas(round.events)
		if len(first) != len(second) {
			t.Fatalf("%d events became %d", len(first), len(second))
		}
		for i := range first {
			a, b := first[i], second[i]
			if a.Type != b.Type || !bytes.Equal(a.Payload, b.Payload) {
				t.Fatalf("event %d: %s %s became %s %s", i, a.Type, a.Payload, b.Type, b.Payload)
			}
		}
	})
}

// An answer streamed with bare CR line ends (which the SSE specification
// allows), or CR, LF and CRLF mixed, reads as the same text as in LF.
func TestReadSSEBareCR(t *testing.T) {
	lf := ": keepalive\n\n" + content("Hel") + "\n" + content("lo") + "\n" + finishChunk + "\n" + doneLine
	for _, body := range []string{
		strings.ReplaceAll(lf, "\n", "\r"),
		strings.ReplaceAll(lf, "\n", "\r\n"),
		": keepalive\r\n\r" + content("Hel") + "\r" + content("lo") + "\n\r" + finishChunk + "\r\n" + doneLine,
	} {
		rec, _, err := readBody([]byte(body))
		if err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		var text strings.Builder
		for _, e := range rec.events {
			if e.Type == protocol.EventTokenDelta {
				p, _ := protocol.DecodePayload[protocol.TokenDeltaPayload](&e)
				text.WriteString(p.Text)
			}
		}
		if text.String() != "Hello" {
			t.Errorf("%q: text %q, want Hello", body, text.String())
		}
	}
}
