package hermes_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/runhub/runhub/protocol"
)

// Hermes' POST /v1/runs takes input (text), instructions,
// conversation_history, previous_response_id, session_id and model
// (_handle_runs in gateway/platforms/api_server.py): no workspace or
// working directory, no attachments. Whatever its server reports, the
// profile has neither capability, and a start carrying either is refused
// unsupported on that field, naming the profile and the capability, with
// nothing sent to Hermes and no session journaled.
func TestCapabilities_NoWorkspaceNoAttachments(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) { completed(s, "ok") }, nil)
	h.fake.setFeatures(func(f map[string]any) {
		for k := range f {
			f[k] = true // every feature on: still neither
		}
	})
	c := capsRuntime(t, h, "")
	caps, _ := c.Capabilities("agent", "")
	if slices.Contains(caps, protocol.CapWorkspace) || slices.Contains(caps, protocol.CapAttachments) {
		t.Fatalf("capabilities %v: Hermes takes no workspace and no attachments", caps)
	}
	if got := publicCaps(t, c); slices.Contains(got, protocol.CapWorkspace) || slices.Contains(got, protocol.CapAttachments) {
		t.Fatalf("GET /v1/profiles capabilities %v", got)
	}
	for _, tc := range []struct {
		need string
		req  protocol.StartRunRequest
	}{
		{protocol.CapWorkspace, protocol.StartRunRequest{Message: "build", Profile: "agent", Workspace: "/home/ann/proj"}},
		{protocol.CapAttachments, protocol.StartRunRequest{Message: "look", Profile: "agent",
			Attachments: []protocol.Attachment{{Name: "notes.txt", URL: "https://files.example/notes.txt"}}}},
	} {
		_, err := h.rt.StartRun(context.Background(), "local", tc.req)
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeUnsupported || pe.Field != tc.need ||
			!strings.Contains(pe.Message, `profile "agent" cannot do `+tc.need) {
			t.Errorf("start with %s: %v, want unsupported: profile \"agent\" cannot do %s", tc.need, err, tc.need)
		}
	}
	if n := len(h.fake.startCalls()); n != 0 {
		t.Fatalf("refused starts reached Hermes %d times", n)
	}
	if list, err := h.store.Sessions(context.Background(), "local"); err != nil || len(list) != 0 {
		t.Fatalf("refused starts journaled sessions %+v (%v)", list, err)
	}
}
