package hub_test

// Capabilities: a session's active_controls offer only what the driver of
// its profile can do, and a control it cannot do is answered unsupported,
// naming the profile and the capability, with nothing journaled — over
// both transports.

import (
	"slices"
	"strings"
	"testing"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/protocol"
)

func TestControlsWS_Capabilities(t *testing.T)   { testCapabilities(t, newWS) }
func TestControlsHTTP_Capabilities(t *testing.T) { testCapabilities(t, newHTTP) }

// capabilities of the test profiles: the simulator behind each, declared
// with fewer capabilities. "plain" lacks steer and goal; "chat" also lacks
// approval and clarify. A start without a profile is the simulator, which
// has everything.
func capabilities(profile, provider string) ([]string, bool) {
	switch profile {
	case "plain":
		return []string{protocol.CapCancel, protocol.CapApproval, protocol.CapClarify, protocol.CapQueue}, true
	case "chat":
		return []string{protocol.CapCancel, protocol.CapQueue, protocol.CapReasoning, protocol.CapUsage}, true
	case "":
		return protocol.Capabilities(), true
	}
	return nil, false
}

func newCapsHub(t *testing.T) *testHub {
	d := &sim.Driver{}
	return newTestHubRuntime(t, hub.Config{Capabilities: capabilities}, runtimeOpts{Adapter: executor.Options{
		Capabilities: capabilities,
		Profiles:     map[string]driver.Profile{"plain": {Driver: d, Kind: sim.Kind}, "chat": {Driver: d, Kind: sim.Kind}},
	}})
}

func testCapabilities(t *testing.T, nt newTransport) {
	th := newCapsHub(t)
	tr := nt(t, th)
	sid := newSession(t, th)
	if st := tr.Session(t, sid, "new session", func(protocol.SessionStatus) bool { return true }); !sameList(st.ActiveControls, idleControls) {
		t.Fatalf("a session without runs (the simulator's by default) lists %v", st.ActiveControls)
	}
	startProfile := func(profile string) protocol.ControlResult {
		t.Helper()
		res := ctl(t, tr, protocol.Control{Op: protocol.OpStart, SessionID: sid, Message: "hello sim", Profile: profile,
			Metadata: simMD(`"approval":true,"tokens":3,"token_ms":1`)}, "")
		want(t, res, protocol.ResultAccepted, "start "+profile)
		return res
	}
	awaiting := func(run protocol.ControlResult, controls ...string) {
		t.Helper()
		st := tr.Session(t, sid, "awaiting approval", func(s protocol.SessionStatus) bool {
			return s.RunID == run.RunID && s.Status == protocol.StatusAwaitingApproval
		})
		if !sameList(st.ActiveControls, controls) {
			t.Fatalf("session of run %s lists %v, want %v", run.RunID, st.ActiveControls, controls)
		}
	}
	unsupported := func(what, profile, capability string, m protocol.Control, key string) {
		t.Helper()
		res := ctl(t, tr, m, key)
		want(t, res, protocol.ResultUnsupported, what)
		if !strings.Contains(res.Message, `profile "`+profile+`"`) || !strings.Contains(res.Message, capability) {
			t.Errorf("%s: message %q names not the profile %q and the capability %q", what, res.Message, profile, capability)
		}
	}

	// "plain" lacks steer and goal: its session offers no goal, a steer and
	// a goal are unsupported, and the run's journal does not move.
	run := startProfile("plain")
	awaiting(run, protocol.OpCancel, protocol.OpApprove, protocol.OpQueue)
	last := runMeta(t, th, run.RunID).LastSeq
	steer := protocol.Control{Op: protocol.OpQueue, SessionID: sid, Message: "left", Mode: protocol.ModeSteer}
	unsupported("steer", "plain", protocol.CapSteer, steer, "")
	unsupported("steer with a key", "plain", protocol.CapSteer, steer, "steer-1")
	unsupported("steer with the key again", "plain", protocol.CapSteer, steer, "steer-1")
	unsupported("goal set", "plain", protocol.CapGoal, protocol.Control{Op: protocol.OpGoal, SessionID: sid, Action: protocol.GoalSet, Text: "turns=2"}, "")
	unsupported("goal status", "plain", protocol.CapGoal, protocol.Control{Op: protocol.OpGoal, SessionID: sid, Action: protocol.GoalStatus}, "")
	if now := runMeta(t, th, run.RunID).LastSeq; now != last {
		t.Fatalf("unsupported controls journaled: last seq %d, was %d", now, last)
	}
	if m := sessionMeta(t, th, sid); m.Goal != nil || len(m.Queue) != 0 || slices.Contains(m.RecentKeys, "steer-1") {
		t.Fatalf("unsupported controls changed the session: %+v", m)
	}
	aid := getRunStatus(t, th, run.RunID).PendingApprovalID
	want(t, approve(t, tr, run.RunID, aid, "once"), protocol.ResultAccepted, "approve on plain")
	terminal(t, th, run.RunID)
	if st := tr.Session(t, sid, "idle after plain", func(s protocol.SessionStatus) bool { return s.RunID == run.RunID && s.Terminal }); !sameList(st.ActiveControls, []string{protocol.OpStart, protocol.OpQueue}) {
		t.Fatalf("idle session of a plain run lists %v", st.ActiveControls)
	}

	// "chat" lacks approval too: a pending approval is not offered, and an
	// answer is unsupported.
	run = startProfile("chat")
	awaiting(run, protocol.OpCancel, protocol.OpQueue)
	last = runMeta(t, th, run.RunID).LastSeq
	aid = getRunStatus(t, th, run.RunID).PendingApprovalID
	unsupported("approve", "chat", protocol.CapApproval, protocol.Control{Op: protocol.OpApprove, RunID: run.RunID, ApprovalID: aid, Choice: "once"}, "")
	unsupported("clarify", "chat", protocol.CapClarify, protocol.Control{Op: protocol.OpClarify, RunID: run.RunID, ClarifyID: "c_1", Response: "x"}, "")
	if now := runMeta(t, th, run.RunID).LastSeq; now != last {
		t.Fatalf("unsupported answers journaled: last seq %d, was %d", now, last)
	}
	if rs := getRunStatus(t, th, run.RunID); rs.PendingApprovalID != aid {
		t.Fatalf("the approval was resolved: %+v", rs)
	}
	want(t, cancelRun(t, tr, run.RunID), protocol.ResultAccepted, "cancel on chat")
	terminal(t, th, run.RunID)

	// A run without a profile is the simulator's: everything again.
	run = start(t, tr, sid, `"approval":true,"tokens":3,"token_ms":1`)
	awaiting(run, protocol.OpCancel, protocol.OpApprove, protocol.OpQueue, protocol.OpGoal)
	want(t, cancelRun(t, tr, run.RunID), protocol.ResultAccepted, "cancel")
	terminal(t, th, run.RunID)
}
