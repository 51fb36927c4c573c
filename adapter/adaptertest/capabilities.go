package adaptertest

import (
	"strings"

	"github.com/runhub/runhub/protocol"
)

// capabilities are the suite's: DriverNamePlain is declared able to cancel
// and queue only; the other drivers declare nothing (every control).
func capabilities(profile, provider string) ([]string, bool) {
	if profile == "" && provider == DriverNamePlain {
		return []string{protocol.CapCancel, protocol.CapQueue}, true
	}
	return nil, false
}

var capabilityTests = []subtest{
	// A control the run's driver cannot do is answered unsupported, naming
	// the driver and the capability, wherever the run executes, and
	// journals nothing; what it can do still works.
	{"Unsupported", func(e *env) {
		r := e.startReq(protocol.StartRunRequest{Message: ScriptApproval, Provider: DriverNamePlain})
		ask := e.waitEvent(r.RunID, ofType(protocol.EventApprovalReq))
		id := approval.id(e, ask)
		ctx, cancel := e.ctx()
		defer cancel()
		unsupported := func(what, capability string, m protocol.Control, key string) {
			e.t.Helper()
			res, err := e.control(ctx, Owner, m, key)
			e.wantResult(what, res, err, protocol.ResultUnsupported, "-", r.SessionID)
			if !strings.Contains(res.Message, `driver "`+DriverNamePlain+`"`) || !strings.Contains(res.Message, capability) {
				e.t.Errorf("%s: message %q names not the driver and %s", what, res.Message, capability)
			}
		}
		unsupported("approve", protocol.CapApproval, protocol.Control{Op: protocol.OpApprove, RunID: r.RunID, ApprovalID: id, Choice: "allow"}, "")
		unsupported("clarify", protocol.CapClarify, protocol.Control{Op: protocol.OpClarify, RunID: r.RunID, ClarifyID: "c_1", Response: "x"}, "")
		for range 2 { // not delivered: its key is not used up
			unsupported("steer", protocol.CapSteer, protocol.Control{Op: protocol.OpQueue, SessionID: r.SessionID, Message: "left", Mode: protocol.ModeSteer}, "s1")
		}
		unsupported("goal", protocol.CapGoal, protocol.Control{Op: protocol.OpGoal, SessionID: r.SessionID, Action: protocol.GoalSet, Text: "goal-once"}, "")
		st, err := e.a.GetRun(ctx, r.RunID)
		if err != nil || st.LastSeq != ask.Seq || st.PendingApprovalID != id {
			e.t.Fatalf("after unsupported controls the run is %+v, %v; want last seq %d and the approval pending", st, err, ask.Seq)
		}
		e.wantRun(r.RunID, e.cancelAndEnd(r.RunID), protocol.EventCancelled)
	}},
	// A start with attachments whose driver lacks the attachments
	// capability is refused before any run (or, without a session, any
	// session) is registered: unsupported by the control path, an
	// unsupported error by StartRun. Its session stays idle, and a driver
	// that declares nothing lets them through.
	{"UnsupportedAttachments", func(e *env) {
		atts := []protocol.Attachment{{Name: "a.png", MediaType: "image/png", URL: "https://files.example/a.png", Size: 10}}
		ctx, cancel := e.ctx()
		defer cancel()
		res, err := e.control(ctx, Owner, protocol.Control{Op: protocol.OpStart, Message: ScriptDone, Provider: DriverNamePlain, Attachments: atts}, "")
		e.wantResult("start control with attachments", res, err, protocol.ResultUnsupported, "", "")
		if !strings.Contains(res.Message, `driver "`+DriverNamePlain+`"`) || !strings.Contains(res.Message, protocol.CapAttachments) {
			e.t.Errorf("start control with attachments: message %q names not the driver and %s", res.Message, protocol.CapAttachments)
		}
		r := e.startReq(protocol.StartRunRequest{Message: ScriptDone, Provider: DriverNamePlain})
		e.wantRun(r.RunID, e.events(r.RunID), protocol.EventDone)
		_, err = e.a.StartRun(ctx, Owner, protocol.StartRunRequest{SessionID: r.SessionID, Message: ScriptDone, Provider: DriverNamePlain, Attachments: atts})
		e.wantCode("StartRun with attachments", err, protocol.CodeUnsupported)
		r = e.startReq(protocol.StartRunRequest{SessionID: r.SessionID, Message: ScriptDone, Provider: DriverNamePlain})
		e.wantRun(r.RunID, e.events(r.RunID), protocol.EventDone)
		r = e.startReq(protocol.StartRunRequest{Message: ScriptDone, Attachments: atts})
		e.wantRun(r.RunID, e.events(r.RunID), protocol.EventDone)
	}},
}
