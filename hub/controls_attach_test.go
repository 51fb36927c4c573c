package hub_test

// Attachments: a start with attachments naming a profile whose driver
// lacks the attachments capability is answered unsupported, naming the
// profile and the capability, before any run or session starts, with
// nothing journaled — over both transports. A driver that takes them gets
// them (the simulator names them in a progress event); a start without
// attachments is unchanged.

import (
	"strings"
	"testing"

	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/protocol"
)

func TestControlsWS_Attachments(t *testing.T)   { testAttachments(t, newWS) }
func TestControlsHTTP_Attachments(t *testing.T) { testAttachments(t, newHTTP) }

func testAttachments(t *testing.T, nt newTransport) {
	th := newCapsHub(t) // "chat" and "plain" lack attachments; the default simulator has them
	tr := nt(t, th)
	sid := newSession(t, th)
	atts := []protocol.Attachment{
		{Name: "cat.png", MediaType: "image/png", URL: "https://files.example/cat.png", Size: 2048},
		{Name: "notes.txt"},
	}
	startWith := func(profile string, atts []protocol.Attachment) protocol.ControlResult {
		t.Helper()
		return ctl(t, tr, protocol.Control{Op: protocol.OpStart, SessionID: sid, Message: "look at these", Profile: profile,
			Attachments: atts, Metadata: simMD(`"tokens":2,"token_ms":1`)}, "")
	}

	for _, profile := range []string{"chat", "plain"} {
		res := startWith(profile, atts)
		want(t, res, protocol.ResultUnsupported, "start with attachments on "+profile)
		if !strings.Contains(res.Message, `profile "`+profile+`"`) || !strings.Contains(res.Message, protocol.CapAttachments) || res.RunID != "" {
			t.Errorf("%s: %+v names not the profile and the capability, or names a run", profile, res)
		}
	}
	if m := sessionMeta(t, th, sid); len(m.Runs) != 0 || m.ActiveRun != "" {
		t.Fatalf("a refused start registered a run: %+v", m)
	}

	// The same profile without attachments starts as before.
	run := startWith("chat", nil)
	want(t, run, protocol.ResultAccepted, "start on chat without attachments")
	evs := terminal(t, th, run.RunID)
	noErrors(t, evs)
	if p := ofType(evs, protocol.EventProgress); len(p) != 0 {
		t.Errorf("a start without attachments got progress %v", p)
	}

	// The simulator takes them: it names them in a progress event.
	run = startWith("", atts)
	want(t, run, protocol.ResultAccepted, "start with attachments on the simulator")
	evs = terminal(t, th, run.RunID)
	noErrors(t, evs)
	p := ofType(evs, protocol.EventProgress)
	if len(p) != 1 || hubtest.Payload[protocol.ProgressPayload](t, p[0]).Text != sim.AttachmentsText(atts) {
		t.Fatalf("progress %v, want one %q", p, sim.AttachmentsText(atts))
	}
	if got := hubtest.Payload[protocol.ProgressPayload](t, p[0]).Text; got != "received 2 attachments: cat.png (image/png, 2048 bytes), notes.txt" {
		t.Errorf("progress text %q", got)
	}
}

// A WebSocket start without a session: the refusal creates none.
func TestControlsWS_AttachmentsNoSessionMade(t *testing.T) {
	th := newCapsHub(t)
	tr := newWS(t, th)
	var before protocol.SessionList
	do(t, "GET", th.URL+"/v1/sessions", "", nil, &before)
	res := ctl(t, tr, protocol.Control{Op: protocol.OpStart, Message: "look", Profile: "chat",
		Attachments: []protocol.Attachment{{Name: "a.txt"}}}, "")
	want(t, res, protocol.ResultUnsupported, "start with attachments on chat, no session")
	if res.SessionID != "" {
		t.Errorf("the refusal names a session: %+v", res)
	}
	var after protocol.SessionList
	do(t, "GET", th.URL+"/v1/sessions", "", nil, &after)
	if len(after.Sessions) != len(before.Sessions) {
		t.Fatalf("sessions %d, were %d: the refused start made one", len(after.Sessions), len(before.Sessions))
	}
}
