package execdrv

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/protocol"
)

// A start's workspace reaches the command in its start line (the driver
// declares workspace, and the harness's executor refuses what it does
// not declare), and run.started records it; a start without one has no
// workspace field.
func TestStartLine_Workspace(t *testing.T) {
	h, out := setup(t, `IFS= read -r start
printf '%s\n' "$start" >> "$OUT/start.json"
echo '{"type":"done","payload":{"status":"completed","usage":null}}'
`, nil)
	rid := h.Start(protocol.StartRunRequest{Message: "build", Profile: "cmd", Workspace: "/home/ann/proj"}).RunID
	ev := h.Events(rid, 10*time.Second)
	drivertest.Terminal(t, ev, protocol.EventDone)
	var started protocol.RunStartedPayload
	if json.Unmarshal(ev[0].Payload, &started); started.Workspace != "/home/ann/proj" {
		t.Errorf("run.started workspace %q", started.Workspace)
	}
	drivertest.Terminal(t, h.Events(start(h, ev[0].SessionID, "again"), 10*time.Second), protocol.EventDone)
	lines := strings.Split(strings.TrimSpace(read(t, filepath.Join(out, "start.json"))), "\n")
	if len(lines) != 2 {
		t.Fatalf("start lines: %q", lines)
	}
	var first, second map[string]json.RawMessage
	if json.Unmarshal([]byte(lines[0]), &first) != nil || json.Unmarshal([]byte(lines[1]), &second) != nil {
		t.Fatalf("start lines: %q", lines)
	}
	if got := string(first["workspace"]); got != `"/home/ann/proj"` {
		t.Errorf("start line workspace %s, want \"/home/ann/proj\"", got)
	}
	if _, ok := second["workspace"]; ok {
		t.Errorf("a start without a workspace has a workspace field: %s", lines[1])
	}
}
