package protocol

import (
	"bytes"
	"encoding/json"
)

// Compacted is one record of a compacted catch-up (protocol.md §5.6; a
// socket whose hello named CapCompactReplay): either one event as it is
// (SeqFrom omitted), or a run of consecutive token.delta or
// reasoning.delta events of one message merged into one. A merged record
// reads as the last event it covers (its seq, event_id, created_at: the
// cursor after it is its event_id) with SeqFrom the first seq it covers and
// a payload whose text is the covered texts concatenated.
type Compacted struct {
	Envelope
	SeqFrom uint64 `json:"seq_from,omitempty"`
}

// First returns the first seq the record covers.
func (c *Compacted) First() uint64 {
	if c.SeqFrom != 0 {
		return c.SeqFrom
	}
	return c.Seq
}

// MaxCompactedText bounds the text of one merged record: a longer run of
// deltas becomes several records.
const MaxCompactedText = 64 << 10

// CompactNext merges the leading events of events, which must be in seq
// order, into one record and returns it with the number of events it
// covers (at least 1; 0 only for an empty slice). Events merge when they
// are of one run with contiguous seqs, all token.delta (same message_id)
// or all reasoning.delta (same block_id), not terminal, and their payload
// has no field other than the id and text; the merged text stays within
// MaxCompactedText. Anything else is returned alone, unchanged.
func CompactNext(events []Envelope) (Compacted, int) {
	if len(events) == 0 {
		return Compacted{}, 0
	}
	first := events[0]
	idKey, ok := deltaIDKey(first.Type)
	if !ok || first.Terminal {
		return Compacted{Envelope: first}, 1
	}
	id, text, ok := deltaFields(first.Payload, idKey)
	if !ok {
		return Compacted{Envelope: first}, 1
	}
	var buf []byte
	n := 1
	for n < len(events) {
		e := &events[n]
		if e.Type != first.Type || e.Terminal || e.RunID != first.RunID || e.SessionID != first.SessionID || e.Seq != events[n-1].Seq+1 {
			break
		}
		eid, etext, ok := deltaFields(e.Payload, idKey)
		if !ok || eid != id || len(text)+len(buf)+len(etext) > MaxCompactedText {
			break
		}
		if buf == nil {
			buf = append(make([]byte, 0, 2*len(text)+2*len(etext)), text...)
		}
		buf = append(buf, etext...)
		n++
	}
	if n == 1 {
		return Compacted{Envelope: first}, 1
	}
	last := events[n-1]
	var payload []byte
	if idKey == "message_id" {
		payload, _ = json.Marshal(TokenDeltaPayload{MessageID: id, Text: string(buf)})
	} else {
		payload, _ = json.Marshal(ReasoningPayload{BlockID: id, Text: string(buf)})
	}
	last.Payload = payload
	return Compacted{Envelope: last, SeqFrom: first.Seq}, n
}

func deltaIDKey(t EventType) (string, bool) {
	switch t {
	case EventTokenDelta:
		return "message_id", true
	case EventReasoningDelta:
		return "block_id", true
	}
	return "", false
}

// deltaFields reads a delta payload that has exactly the fields idKey and
// text, both strings.
func deltaFields(payload json.RawMessage, idKey string) (id, text string, ok bool) {
	if rawID, rawText, fast := deltaStrings(payload, idKey); fast {
		// The shape drivers emit (fastdelta.go): no map to decode.
		if id, ok = unquote(rawID); ok {
			text, ok = unquote(rawText)
		}
		return id, text, ok
	}
	if !bytes.HasPrefix(bytes.TrimSpace(payload), []byte("{")) {
		return "", "", false
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(payload, &fields) != nil || len(fields) != 2 {
		return "", "", false
	}
	rawID, ok1 := fields[idKey]
	rawText, ok2 := fields["text"]
	if !ok1 || !ok2 || json.Unmarshal(rawID, &id) != nil || json.Unmarshal(rawText, &text) != nil {
		return "", "", false
	}
	return id, text, true
}
