package openai

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/protocol"
)

// The chat completions API takes no workspace: the driver does not
// declare workspace, and a start with one is refused unsupported, naming
// the profile and the capability, before anything is journaled. The same
// start with attachments instead runs, and they reach the upstream.
func TestCapabilities_WorkspaceRefusedAttachmentsTaken(t *testing.T) {
	reg := profile.NewRegistry(Registration())
	declared, _ := reg.Capabilities(Kind)
	if !slices.Contains(declared, protocol.CapAttachments) || slices.Contains(declared, protocol.CapWorkspace) {
		t.Fatalf("declared %v: want attachments, no workspace", declared)
	}
	f := newFake(t, answerOK)
	d, err := New(Config{BaseURL: f.srv.URL, Model: "m-test", IdleTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h := drivertest.New(t, drivertest.Config{
		Profiles:     map[string]driver.Profile{"fake": {Driver: d, Kind: Kind, Model: "m-test"}},
		Capabilities: func(string, string) ([]string, bool) { return declared, true }})
	h.Refused(protocol.StartRunRequest{Message: "build", Profile: "fake", Workspace: "/home/ann/proj"}, protocol.CapWorkspace)
	f.mu.Lock()
	n := len(f.bodies)
	f.mu.Unlock()
	if n != 0 {
		t.Fatalf("the refused start reached the upstream %d times", n)
	}
	rid := h.Start(protocol.StartRunRequest{Message: "look", Profile: "fake",
		Attachments: []protocol.Attachment{{Name: "notes.txt", URL: "https://files.example/notes.txt"}}}).RunID
	drivertest.Terminal(t, h.Events(rid, 10*time.Second), protocol.EventDone)
	f.mu.Lock()
	body := string(f.bodies[0])
	f.mu.Unlock()
	if !strings.Contains(body, "https://files.example/notes.txt") {
		t.Fatalf("the attachment did not reach the upstream: %s", body)
	}
}
