package hub_test

// Workspace: a start with a workspace naming a profile whose driver lacks
// the workspace capability is answered unsupported, naming the profile and
// the capability, before any run or session starts — over both
// transports. A driver that takes it gets it, and run.started records it.

import (
	"strings"
	"testing"

	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/protocol"
)

func TestControlsWS_Workspace(t *testing.T)   { testWorkspace(t, newWS) }
func TestControlsHTTP_Workspace(t *testing.T) { testWorkspace(t, newHTTP) }

func testWorkspace(t *testing.T, nt newTransport) {
	th := newCapsHub(t) // "chat" and "plain" lack workspace; the default (every capability) has it
	tr := nt(t, th)
	if tr.Name() == "ws" { // a start without a session: the refusal creates none (HTTP starts name one)
		noSessionMade(t, th, tr)
	}
	sid := newSession(t, th)
	startWith := func(profile, ws string) protocol.ControlResult {
		t.Helper()
		return ctl(t, tr, protocol.Control{Op: protocol.OpStart, SessionID: sid, Message: "build", Profile: profile,
			Workspace: ws, Metadata: simMD(`"tokens":2,"token_ms":1`)}, "")
	}
	for _, profile := range []string{"chat", "plain"} {
		res := startWith(profile, "/home/ann/proj")
		want(t, res, protocol.ResultUnsupported, "start with a workspace on "+profile)
		if !strings.Contains(res.Message, `profile "`+profile+`"`) || !strings.Contains(res.Message, protocol.CapWorkspace) || res.RunID != "" {
			t.Errorf("%s: %+v names not the profile and the capability, or names a run", profile, res)
		}
	}
	if m := sessionMeta(t, th, sid); len(m.Runs) != 0 || m.ActiveRun != "" {
		t.Fatalf("a refused start registered a run: %+v", m)
	}
	run := startWith("chat", "")
	want(t, run, protocol.ResultAccepted, "start on chat without a workspace")
	noErrors(t, terminal(t, th, run.RunID))

	run = startWith("", "/home/ann/proj")
	want(t, run, protocol.ResultAccepted, "start with a workspace on a driver that takes it")
	evs := terminal(t, th, run.RunID)
	noErrors(t, evs)
	if p := hubtest.Payload[protocol.RunStartedPayload](t, evs[0]); evs[0].Type != protocol.EventRunStarted || p.Workspace != "/home/ann/proj" {
		t.Fatalf("first event %s %s, want run.started with the workspace", evs[0].Type, evs[0].Payload)
	}
}

func noSessionMade(t *testing.T, th *testHub, tr transport) {
	t.Helper()
	var before protocol.SessionList
	do(t, "GET", th.URL+"/v1/sessions", "", nil, &before)
	res := ctl(t, tr, protocol.Control{Op: protocol.OpStart, Message: "build", Profile: "chat", Workspace: "/home/ann/proj"}, "")
	want(t, res, protocol.ResultUnsupported, "start with a workspace on chat, no session")
	if !strings.Contains(res.Message, `profile "chat" cannot do workspace`) || res.RunID != "" || res.SessionID != "" {
		t.Errorf("%+v names not the profile and the capability, or names a run or session", res)
	}
	var after protocol.SessionList
	do(t, "GET", th.URL+"/v1/sessions", "", nil, &after)
	if len(after.Sessions) != len(before.Sessions) {
		t.Fatalf("sessions %d, were %d: the refused start made one", len(after.Sessions), len(before.Sessions))
	}

}
