package driver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// chunkDriver streams text in chunks as token.delta, reasoning.delta and
// tool.updated, as a model and a tool would.
type chunkDriver struct {
	chunks []string
	pause  time.Duration // after the first chunk of the reasoning
}

func (d chunkDriver) Execute(ctx context.Context, x *driver.Execution) (*protocol.Usage, error) {
	streams := []struct {
		typ protocol.EventType
		p   func(string) any
	}{
		{protocol.EventReasoningDelta, func(s string) any { return protocol.ReasoningPayload{BlockID: "b1", Text: s} }},
		{protocol.EventTokenDelta, func(s string) any { return protocol.TokenDeltaPayload{MessageID: "m1", Text: s} }},
		{protocol.EventToolUpdated, func(s string) any {
			return protocol.ToolUpdatedPayload{ToolCallID: "t1", Stream: "stdout", Text: s}
		}},
	}
	for _, st := range streams {
		if st.typ == protocol.EventToolUpdated {
			if _, err := x.Emit(ctx, protocol.EventToolStarted, protocol.ToolStartedPayload{ToolCallID: "t1", Name: "sh", Args: []byte(`{}`)}); err != nil {
				return nil, err
			}
		}
		for i, c := range d.chunks {
			if _, err := x.Emit(ctx, st.typ, st.p(c)); err != nil {
				return nil, err
			}
			if i == 0 && d.pause > 0 && st.typ == protocol.EventReasoningDelta {
				time.Sleep(d.pause)
			}
		}
		if st.typ == protocol.EventReasoningDelta {
			if _, err := x.Emit(ctx, protocol.EventReasoningDone, protocol.ReasoningPayload{BlockID: "b1"}); err != nil {
				return nil, err
			}
		}
	}
	// The text of the last stream is still held: the executor lets it out.
	return &protocol.Usage{Provider: "chunks"}, nil
}

func chunkHarness(t *testing.T, d driver.Driver) *drivertest.Harness {
	return drivertest.New(t, drivertest.Config{Profiles: map[string]driver.Profile{"chunks": {Driver: d, Kind: "chunks"}}})
}

// A secret streamed in pieces of 1–5 bytes (none of which looks like a
// secret) is redacted whole: in model text, reasoning and tool output, for
// every cut; the streams' text is otherwise unchanged — the same as the
// whole text redacted at once — and re-cut only at word ends.
func TestHoldback_SecretsSplitAcrossDeltas(t *testing.T) {
	text := drivertest.SecretText()
	want := journal.RedactString(text)
	for _, s := range drivertest.Secrets {
		if strings.Contains(want, s.Value) {
			t.Fatalf("the journal's redaction does not recognize the %s in %q", s.Name, s.Context)
		}
	}
	for seed := range uint64(40) {
		h := chunkHarness(t, chunkDriver{chunks: drivertest.Chunks(text, 5, seed)})
		rid := h.Start(protocol.StartRunRequest{Message: "go", Profile: "chunks"}).RunID
		ev := h.Events(rid, 10*time.Second)
		drivertest.Terminal(t, ev, protocol.EventDone)
		drivertest.NoLeak(t, h, ev, true)
		for _, typ := range []protocol.EventType{protocol.EventTokenDelta, protocol.EventReasoningDelta, protocol.EventToolUpdated} {
			if got := drivertest.StreamText(t, ev, typ); got != want {
				t.Fatalf("seed %d: the %s text\n got %q\nwant %q", seed, typ, got, want)
			}
		}
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
}

// A word the stream stops in the middle of goes out after a second without
// more text (a model pausing mid-word is not held up for ever), while the
// run is still going.
func TestHoldback_PausedWordGoesOut(t *testing.T) {
	h := chunkHarness(t, chunkDriver{chunks: []string{"thinking", " more"}, pause: 3 * time.Second})
	rid := h.Start(protocol.StartRunRequest{Message: "go", Profile: "chunks"}).RunID
	start := time.Now()
	e := h.WaitFor(rid, 10*time.Second, func(e protocol.Envelope) bool { return e.Type == protocol.EventReasoningDelta })
	took := time.Since(start)
	if p, _ := protocol.DecodePayload[protocol.ReasoningPayload](&e); p.Text != "thinking" || took >= 2900*time.Millisecond || took < 900*time.Millisecond {
		t.Fatalf("the held word came after %v as %q, want \"thinking\" after about a second", took, p.Text)
	}
	ev := h.Events(rid, 20*time.Second)
	if got := drivertest.StreamText(t, ev, protocol.EventReasoningDelta); got != "thinking more" {
		t.Fatalf("reasoning text %q", got)
	}
}
