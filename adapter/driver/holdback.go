package driver

import (
	"context"
	"encoding/json"
	"regexp"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Streamed text (token.delta, reasoning.delta, tool.updated text) comes in
// chunks of a few characters: a model streams "sk-proj-Q3vT…" as several
// deltas, none of which looks like a key, so the journal's redaction,
// which sees one event at a time, would let the key through in pieces.
// Execution.Emit therefore holds back the end of a text stream that could
// still become a secret — its last word, and the word before when that is
// a credential keyword ("Bearer", "password:", "api_key=", …) — and
// journals the text before it, redacted, once the rest of the word has
// come. Held text goes out (redacted) when the stream moves on: the next
// whitespace, another stream or event, the run's end, or holdFor without
// more text (a model pausing mid-word is shown the word). A word longer
// than maxHeld is let out but for its last heldTail bytes.
const (
	maxHeld  = 4 << 10
	heldTail = 256
	holdFor  = time.Second
)

// secretLead matches the end of text that introduces a secret in the
// words that follow: "Bearer ", "token ", "password: ", `"api_key": "`.
// The keywords are the journal's (journal.CredentialKeywords).
var secretLead = regexp.MustCompile(`(?i)\b(` + journal.CredentialKeywords + `)["']?\s*[:=]?\s*["']?\s*$`)

// heldText is the held-back end of one text stream.
type heldText struct {
	typ    protocol.EventType
	id     string // message_id, block_id, or tool_call_id + stream
	stream string // tool.updated's stream
	text   string
}

// streamKey returns the stream a text event belongs to and its text; ok is
// false for every other event (and a tool.updated carrying data). payload
// is what e.Payload was encoded from: a payload of the event's own type is
// read as it is, anything else is decoded from e.Payload.
func streamKey(e *protocol.Envelope, payload any) (id, stream, text string, ok bool) {
	switch p := payload.(type) {
	case protocol.TokenDeltaPayload:
		if e.Type == protocol.EventTokenDelta {
			return p.MessageID, "", p.Text, true
		}
	case protocol.ReasoningPayload:
		if e.Type == protocol.EventReasoningDelta {
			return p.BlockID, "", p.Text, true
		}
	case protocol.ToolUpdatedPayload:
		if e.Type == protocol.EventToolUpdated {
			if len(p.Data) > 0 {
				return "", "", "", false
			}
			return p.ToolCallID + "\x00" + p.Stream, p.Stream, p.Text, true
		}
	}
	switch e.Type {
	case protocol.EventTokenDelta:
		var p protocol.TokenDeltaPayload
		if json.Unmarshal(e.Payload, &p) != nil {
			return "", "", "", false
		}
		return p.MessageID, "", p.Text, true
	case protocol.EventReasoningDelta:
		var p protocol.ReasoningPayload
		if json.Unmarshal(e.Payload, &p) != nil {
			return "", "", "", false
		}
		return p.BlockID, "", p.Text, true
	case protocol.EventToolUpdated:
		var p protocol.ToolUpdatedPayload
		if json.Unmarshal(e.Payload, &p) != nil || len(p.Data) > 0 {
			return "", "", "", false
		}
		return p.ToolCallID + "\x00" + p.Stream, p.Stream, p.Text, true
	}
	return "", "", "", false
}

// textEvent rebuilds a stream's event with text.
func (h *heldText) event(x *Execution, text string) (protocol.Envelope, error) {
	var payload any
	switch h.typ {
	case protocol.EventTokenDelta:
		payload = protocol.TokenDeltaPayload{MessageID: h.id, Text: text}
	case protocol.EventReasoningDelta:
		payload = protocol.ReasoningPayload{BlockID: h.id, Text: text}
	default:
		id := h.id[:len(h.id)-len(h.stream)-1]
		payload = protocol.ToolUpdatedPayload{ToolCallID: id, Stream: h.stream, Text: text}
	}
	return protocol.NewEvent(x.RunID, x.SessionID, h.typ, payload)
}

// splitHeld splits a stream's text into what can go out now and what must
// wait for more.
func splitHeld(s string) (out, held string) {
	cut := len(s)
	// The last word (nothing after the last space).
	for cut > 0 {
		r, n := utf8.DecodeLastRuneInString(s[:cut])
		if unicode.IsSpace(r) {
			break
		}
		cut -= n
	}
	// The keyword before it.
	if journal.MayHoldCredentialKeyword(s[:cut]) {
		if loc := secretLead.FindStringIndex(s[:cut]); loc != nil {
			cut = loc[0]
		}
	}
	if len(s)-cut > maxHeld {
		cut = len(s) - heldTail
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++
		}
	}
	return s[:cut], s[cut:]
}

// emitStreamed journals a text event through the hold-back: the stream's
// held text and the new text are split; what can go out is journaled as
// one event (redacted by the journal, like every event: the hold-back only
// keeps a secret split over deltas whole), the rest waits. A held stream other than this
// one is flushed first. Called with x.emitMu held.
func (x *Execution) emitStreamed(ctx context.Context, e protocol.Envelope, id, stream, text string) (protocol.Envelope, error) {
	h := x.held
	if h != nil && (h.typ != e.Type || h.id != id) {
		if err := x.flushHeld(ctx); err != nil {
			return protocol.Envelope{}, err
		}
		h = nil
	}
	if h == nil {
		if _, rest := splitHeld(text); rest == "" {
			// Nothing held, nothing to hold (text ending at a word's end,
			// as most do): the event goes as it is; the journal redacts it.
			return x.Append(ctx, e)
		}
		h = &heldText{typ: e.Type, id: id, stream: stream}
	}
	if err := protocol.ValidateEvent(&e); err != nil {
		return e, err // refused as the journal would, before anything is held
	}
	out, rest := splitHeld(h.text + text)
	h.text = rest
	x.held = h
	if h.text == "" {
		x.held = nil
	} else {
		x.armHeld()
	}
	if out == "" {
		return protocol.Envelope{RunID: x.RunID, SessionID: x.SessionID, Type: e.Type}, nil
	}
	ev, err := h.event(x, out) // the journal redacts it (journal.Prepare), whole
	if err != nil {
		return ev, err
	}
	return x.Append(ctx, ev)
}

// armHeld (re)starts the timer that lets held text out after holdFor
// without more. Called with x.emitMu held.
func (x *Execution) armHeld() {
	x.heldGen++
	gen := x.heldGen
	if x.heldTimer != nil {
		x.heldTimer.Stop()
	}
	x.heldTimer = time.AfterFunc(holdFor, func() {
		x.emitMu.Lock()
		defer x.emitMu.Unlock()
		if gen != x.heldGen {
			return // more text came, or it was flushed
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		x.flushHeld(ctx) // a failure here fails the next Emit's flush too, or the run's end
	})
}

// flushHeld journals the held text, if any. Called with
// x.emitMu held.
func (x *Execution) flushHeld(ctx context.Context) error {
	h := x.held
	if h == nil {
		return nil
	}
	x.held = nil
	x.heldGen++
	if x.heldTimer != nil {
		x.heldTimer.Stop()
	}
	ev, err := h.event(x, h.text)
	if err != nil {
		return err
	}
	_, err = x.Append(ctx, ev)
	return err
}

// Flush journals the text a stream still holds back. The executor calls
// it when the driver returns; a driver need not.
func (x *Execution) Flush(ctx context.Context) error {
	x.emitMu.Lock()
	defer x.emitMu.Unlock()
	return x.flushHeld(ctx)
}
