package hub_test

import (
	"testing"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/protocol"
)

// Each control of a run reads one meta end to end: the hub authorizes
// nothing itself, the Router reads the run (or, for a control naming only
// its session, the session) once and checks the owner on it, and the
// executor reads none. (adaptertest's Control/OneMetaRead checks the same
// below the hub, in-process and in runners mode.)
func TestControl_OneMetaReadEndToEnd(t *testing.T) {
	th := newTestHubRuntime(t, hub.Config{}, runtimeOpts{Counted: true})
	ctx := ctxT(t, 20*time.Second)
	control := func(what string, m protocol.Control, key string) protocol.ControlResult {
		t.Helper()
		if !th.Counted.Settled() {
			t.Fatalf("before %s: meta reads never settled", what)
		}
		th.Counted.Begin()
		res, err := th.Hub.Control(ctx, "local", &m, key)
		if err != nil || !res.Accepted {
			t.Fatalf("%s: %+v, %v", what, res, err)
		}
		if n := th.Counted.Window(); n != 1 {
			t.Errorf("%s read %d metas; want 1", what, n)
		}
		return res
	}
	start := func(m protocol.Control) protocol.ControlResult {
		t.Helper()
		res, err := th.Hub.Control(ctx, "local", &m, "")
		if err != nil || !res.Accepted {
			t.Fatalf("start: %+v, %v", res, err)
		}
		return res
	}

	r := start(simStart("", 3, 1, `,"approval":true`))
	a := waitEvent(t, th, r.RunID, "approval requested", isType(protocol.EventApprovalReq))
	p, err := protocol.DecodePayload[protocol.ApprovalRequestedPayload](&a)
	if err != nil {
		t.Fatal(err)
	}
	control("approve", protocol.Control{Op: protocol.OpApprove, RunID: r.RunID, ApprovalID: p.ApprovalID, Choice: "once"}, "")
	waitEvent(t, th, r.RunID, "the run's end", func(e *protocol.Envelope) bool { return e.Terminal })

	r = start(simStart(r.SessionID, 100000, 50, ""))
	waitEvent(t, th, r.RunID, "a token", isType(protocol.EventTokenDelta))
	control("cancel", protocol.Control{Op: protocol.OpCancel, RunID: r.RunID}, "")
	waitEvent(t, th, r.RunID, "the run's end", func(e *protocol.Envelope) bool { return e.Terminal })

	r = start(simStart(r.SessionID, 100000, 50, ""))
	waitEvent(t, th, r.RunID, "a token", isType(protocol.EventTokenDelta))
	control("cancel by session", protocol.Control{Op: protocol.OpCancel, SessionID: r.SessionID}, "")
	waitEvent(t, th, r.RunID, "the run's end", func(e *protocol.Envelope) bool { return e.Terminal })
}
