package sim_test

import (
	"slices"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/protocol"
)

// The simulator takes attachments (it names them in a progress event) and
// does nothing with a workspace, so it does not declare workspace: a start
// with one is refused unsupported, naming the profile and the capability,
// with nothing journaled, under the capabilities it declares.
func TestRegistration_AttachmentsTakenWorkspaceRefused(t *testing.T) {
	declared, _ := profile.NewRegistry(sim.Registration()).Capabilities(sim.Kind)
	if !slices.Contains(declared, protocol.CapAttachments) || slices.Contains(declared, protocol.CapWorkspace) {
		t.Fatalf("declared %v: want attachments, no workspace", declared)
	}
	h := drivertest.New(t, drivertest.Config{
		Profiles:     map[string]driver.Profile{"sim": {Driver: &sim.Driver{}, Kind: sim.Kind}},
		Capabilities: func(string, string) ([]string, bool) { return declared, true }})
	md := []byte(`{"sim":{"tokens":1,"token_ms":1,"tools":0}}`)
	h.Refused(protocol.StartRunRequest{Message: "build", Profile: "sim", Workspace: "/home/ann/proj", Metadata: md}, protocol.CapWorkspace)

	atts := []protocol.Attachment{{Name: "notes.txt", MediaType: "text/plain", Size: 12}}
	rid := h.Start(protocol.StartRunRequest{Message: "look", Profile: "sim", Attachments: atts, Metadata: md}).RunID
	ev := h.Events(rid, 10*time.Second)
	drivertest.Terminal(t, ev, protocol.EventDone)
	if got := drivertest.StreamText(t, ev, protocol.EventProgress); got != sim.AttachmentsText(atts) {
		t.Fatalf("progress %q, want %q", got, sim.AttachmentsText(atts))
	}
}
