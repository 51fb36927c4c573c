package driver

import (
	"encoding/json"
	"testing"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// journal.MayHoldCredentialKeyword never says no where secretLead matches
// (it only spares the regular expression), in any case, non-ASCII folding
// included.
func TestMayHoldCredentialKeywordCoversSecretLead(t *testing.T) {
	inputs := []string{
		"w1 w2 ", "Bearer ", "auth: BASIC ", "my token ", "TOKEN= ", `"api_key": "`, "API-KEY=", "apikey:",
		"access_token=", "Auth-Token: ", "secret ", "SeCrEt: ", "password: ", "PASSWD=", "to\u212Aen ", "ſecret ",
		"pa\u017F\u017Fword: ", "the basics ", "no lead here ", "",
	}
	for _, s := range inputs {
		if secretLead.MatchString(s) && !journal.MayHoldCredentialKeyword(s) {
			t.Errorf("secretLead matches %q but MayHoldCredentialKeyword says no", s)
		}
	}
	if journal.MayHoldCredentialKeyword("w1 w2 w3 ") {
		t.Error("plain tokens go to the regular expression")
	}
}

// streamKey reads a typed payload as it is, with the same answer as
// decoding the event's JSON.
func TestStreamKeyTypedMatchesDecoded(t *testing.T) {
	cases := []struct {
		typ protocol.EventType
		p   any
	}{
		{protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m1", Text: "w1 "}},
		{protocol.EventReasoningDelta, protocol.ReasoningPayload{BlockID: "b1", Text: "r "}},
		{protocol.EventToolUpdated, protocol.ToolUpdatedPayload{ToolCallID: "t1", Stream: "stderr", Text: "x"}},
		{protocol.EventToolUpdated, protocol.ToolUpdatedPayload{ToolCallID: "t1", Data: json.RawMessage(`{"a":1}`)}},
		{protocol.EventReasoningDone, protocol.ReasoningPayload{BlockID: "b1"}},
		{protocol.EventProgress, protocol.ProgressPayload{Text: "p"}},
		{protocol.EventTokenDelta, map[string]any{"message_id": "m2", "text": "y"}},
	}
	for _, c := range cases {
		e, err := protocol.NewEvent("r_1", "s_1", c.typ, c.p)
		if err != nil {
			t.Fatal(err)
		}
		id, stream, text, ok := streamKey(&e, c.p)
		id2, stream2, text2, ok2 := streamKey(&e, nil)
		if id != id2 || stream != stream2 || text != text2 || ok != ok2 {
			t.Errorf("%s %+v: typed (%q %q %q %v), decoded (%q %q %q %v)", c.typ, c.p, id, stream, text, ok, id2, stream2, text2, ok2)
		}
	}
}

// The hold-back's work on a plain token: find its stream and text, and
// split off what must wait (nothing).
func BenchmarkHoldback_PlainToken(b *testing.B) {
	p := protocol.TokenDeltaPayload{MessageID: "m1", Text: "w1234 "}
	e, err := protocol.NewEvent("r_1", "s_1", protocol.EventTokenDelta, p)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_, _, text, _ := streamKey(&e, p)
		splitHeld(text)
	}
}
