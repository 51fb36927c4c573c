package driver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/protocol"
)

// answerDriver streams a first message, a tool call, then the final
// message (in chunks), or fails with err after streaming.
type answerDriver struct {
	final []string
	err   error
}

func (d answerDriver) Execute(ctx context.Context, x *driver.Execution) (*protocol.Usage, error) {
	emit := func(typ protocol.EventType, p any) error { _, err := x.Emit(ctx, typ, p); return err }
	if err := emit(protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m1", Text: "Let me look. "}); err != nil {
		return nil, err
	}
	if err := emit(protocol.EventToolStarted, protocol.ToolStartedPayload{ToolCallID: "t1", Name: "ls", Args: []byte(`{}`)}); err != nil {
		return nil, err
	}
	if err := emit(protocol.EventToolDone, protocol.ToolDonePayload{ToolCallID: "t1", Status: "ok", Result: []byte(`"a b"`)}); err != nil {
		return nil, err
	}
	for _, c := range d.final {
		if err := emit(protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m2", Text: c}); err != nil {
			return nil, err
		}
	}
	return &protocol.Usage{Provider: "answer"}, d.err
}

func answerRun(t *testing.T, d answerDriver) (*drivertest.Harness, []protocol.Envelope, protocol.RunStatus) {
	t.Helper()
	h := drivertest.New(t, drivertest.Config{Profiles: map[string]driver.Profile{"answer": {Driver: d, Kind: "answer"}}})
	rid := h.Start(protocol.StartRunRequest{Message: "go", Profile: "answer"}).RunID
	ev := h.Events(rid, 10*time.Second)
	st, err := h.RT.GetRun(context.Background(), rid)
	if err != nil {
		t.Fatal(err)
	}
	return h, ev, st
}

// done carries the run's final assistant text — its last message, redacted,
// held-back text included — and the seq of the event before it; the run's
// status (GET /v1/runs/{rid}) carries the same result.
func TestDone_ResultAndLastSeq(t *testing.T) {
	secret := "sk-proj-" + strings.Repeat("Q3vT9xLm", 5)
	_, ev, st := answerRun(t, answerDriver{final: []string{"The files are a ", "and b; the key is ", secret[:10], secret[10:], " ok, don"}})
	e := drivertest.Terminal(t, ev, protocol.EventDone)
	p, err := protocol.DecodePayload[protocol.DonePayload](&e)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.Result, "The files are a and b; the key is ") || !strings.HasSuffix(p.Result, " ok, don") ||
		strings.Contains(p.Result, "Let me look") || strings.Contains(p.Result, secret[8:]) || p.Truncated {
		t.Errorf("done result %q (truncated %v): want the last message, redacted, whole", p.Result, p.Truncated)
	}
	if p.LastSeq != e.Seq-1 {
		t.Errorf("done last_seq %d, done is seq %d", p.LastSeq, e.Seq)
	}
	if st.Result != p.Result || st.ResultTruncated || st.Error != nil || st.TerminalState != protocol.StatusCompleted {
		t.Errorf("run status %+v, want done's result", st)
	}
}

// A final text over the cap is cut to MaxResultBytes and flagged, in done
// and in the run's status.
func TestDone_ResultCapped(t *testing.T) {
	word := "word€ "
	chunk := strings.Repeat(word, 50)
	n := (protocol.MaxResultBytes*3)/len(chunk) + 1
	chunks := make([]string, n)
	for i := range chunks {
		chunks[i] = chunk
	}
	_, ev, st := answerRun(t, answerDriver{final: chunks})
	e := drivertest.Terminal(t, ev, protocol.EventDone)
	p, err := protocol.DecodePayload[protocol.DonePayload](&e)
	if err != nil {
		t.Fatal(err)
	}
	whole := strings.Repeat(chunk, n)
	if !p.Truncated || len(p.Result) > protocol.MaxResultBytes || len(p.Result) < protocol.MaxResultBytes-4 || !strings.HasPrefix(whole, p.Result) {
		t.Errorf("done result %d bytes, truncated %v: want the first ≤%d bytes, flagged", len(p.Result), p.Truncated, protocol.MaxResultBytes)
	}
	if st.Result != p.Result || !st.ResultTruncated {
		t.Errorf("run status result %d bytes, truncated %v", len(st.Result), st.ResultTruncated)
	}
}

// A run that fails carries its error's code and message in its status, and
// no result.
func TestRunStatus_Error(t *testing.T) {
	_, ev, st := answerRun(t, answerDriver{final: []string{"half an ans"}, err: &driver.Error{Code: protocol.ErrorProviderError, Message: "upstream answered 502"}})
	drivertest.Terminal(t, ev, protocol.EventError)
	if st.TerminalState != protocol.StatusFailed || st.Result != "" ||
		st.Error == nil || *st.Error != (protocol.RunError{Code: protocol.ErrorProviderError, Message: "upstream answered 502"}) {
		t.Errorf("failed run status %+v (error %+v)", st, st.Error)
	}
}
