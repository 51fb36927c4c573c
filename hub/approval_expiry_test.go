package hub_test

import (
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/protocol"
)

// An approval answered at the moment it expires (executor.Options.
// ApprovalTimeout) is resolved exactly once, and consistently: an answer
// accepted is journaled as resolved with its choice; one answered expired
// finds the prompt journaled expired with choice deny.
func testApprovalRaceExpiry(t *testing.T, nt newTransport) {
	const timeout = 40 * time.Millisecond
	th := newTestHubRuntime(t, hub.Config{}, runtimeOpts{Adapter: executor.Options{ApprovalTimeout: timeout}})
	tr := nt(t, th)
	var sid string
	outcomes := map[string]int{}
	for i := 0; i < 12; i++ {
		run := start(t, tr, sid, `"approval":true,"tools":1,"tokens":1,"token_ms":0`)
		sid = run.SessionID
		req := waitEvent(t, th, run.RunID, "approval.requested", isType(protocol.EventApprovalReq))
		time.Sleep(time.Until(time.Unix(0, int64(req.CreatedAt*1e9)).Add(timeout - time.Duration(i%4)*time.Millisecond)))
		res := approve(t, tr, run.RunID, hubtest.Payload[protocol.ApprovalRequestedPayload](t, req).ApprovalID, "once")
		evs := terminal(t, th, run.RunID)
		resolved := ofType(evs, protocol.EventApprovalRes)
		if len(resolved) != 1 {
			t.Fatalf("%d approval.resolved events, want 1", len(resolved))
		}
		p := hubtest.Payload[protocol.ApprovalResolvedPayload](t, resolved[0])
		outcomes[res.Status+"/"+p.Status]++
		switch {
		case res.Status == protocol.ResultAccepted && (p.Status != "resolved" || p.Choice != "once"):
			t.Fatalf("an accepted answer was recorded as %+v", p)
		case res.Status == protocol.ResultExpired && (p.Status != "expired" || p.Choice != "deny"):
			t.Fatalf("an answer answered expired, but the prompt was recorded %+v", p)
		case res.Status != protocol.ResultAccepted && res.Status != protocol.ResultExpired && res.Status != protocol.ResultNotActive:
			t.Fatalf("answer racing the expiry: %+v", res)
		}
	}
	t.Logf("outcomes: %v", outcomes)
}

func TestControlsWS_ApprovalRaceExpiry(t *testing.T)   { testApprovalRaceExpiry(t, newWS) }
func TestControlsHTTP_ApprovalRaceExpiry(t *testing.T) { testApprovalRaceExpiry(t, newHTTP) }
