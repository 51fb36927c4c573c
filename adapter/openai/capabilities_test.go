package openai

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/protocol"
)

// The driver declares what it really does, and no more: reasoning (a
// reasoning_content delta becomes reasoning.delta), usage (usage.final),
// cancel, queue, goal (its model judges) and attachments (content parts,
// TestAttachments_ContentParts). It takes no guidance while it streams
// (no steer), asks nothing (no approval, no clarify), and maps no tool
// call: a tool_calls delta gives no tool event, so no tools.
func TestRegistration_DeclaresWhatItDoes(t *testing.T) {
	caps, ok := profile.NewRegistry(Registration()).Capabilities(Kind)
	want := []string{protocol.CapCancel, protocol.CapQueue, protocol.CapGoal, protocol.CapAttachments, protocol.CapReasoning, protocol.CapUsage}
	if !ok || !slices.Equal(caps, want) {
		t.Fatalf("declared %v %v, want %v", caps, ok, want)
	}
	const toolChunk = `data: {"id":"c1","model":"m-up","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"ls","arguments":"{}"}}]}}]}` + "\n"
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		send(w, roleChunk, reasoning("think "), toolChunk, content("ok"), finishChunk, usageChunk, doneLine)
	})
	d, err := New(Config{BaseURL: f.srv.URL, Model: "m-test", IdleTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h := harness(t, d, nil, nil)
	if st, ok := any(d).(driver.Steerer); ok && st.Steers() {
		t.Error("the driver says it steers")
	}
	ev := h.Events(start(h, "", "hi"), 10*time.Second)
	drivertest.Terminal(t, ev, protocol.EventDone)
	var seen []protocol.EventType
	for _, e := range ev {
		seen = append(seen, e.Type)
	}
	for _, typ := range []protocol.EventType{protocol.EventReasoningDelta, protocol.EventUsageFinal} {
		if !slices.Contains(seen, typ) {
			t.Errorf("no %s in %v: the capability it declares is not done", typ, seen)
		}
	}
	for _, typ := range []protocol.EventType{protocol.EventToolStarted, protocol.EventApprovalReq, protocol.EventClarifyReq} {
		if slices.Contains(seen, typ) {
			t.Errorf("%s in %v: the driver does what it does not declare", typ, seen)
		}
	}
}
