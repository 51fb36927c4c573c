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

// A start's attachments reach the command in the start line, as the start
// gave them ({name, media_type, url, size}); the session's next run gets
// them with that turn in history, and its own start line, without
// attachments, has no attachments field.
func TestStartLine_Attachments(t *testing.T) {
	h, out := setup(t, `IFS= read -r start
printf '%s\n' "$start" >> "$OUT/start.json"
echo '{"type":"token.delta","payload":{"message_id":"m1","text":"ok"}}'
echo '{"type":"done","payload":{"status":"completed","usage":null}}'
`, nil)
	atts := []protocol.Attachment{
		{Name: "cat.png", MediaType: "image/png", URL: "https://files.example/cat.png", Size: 2048},
		{Name: "notes.txt", MediaType: "text/plain", URL: "file:///home/ann/notes.txt", Size: 12},
		{Name: "bare"},
	}
	const wantAtts = `[{"name":"cat.png","media_type":"image/png","url":"https://files.example/cat.png","size":2048},` +
		`{"name":"notes.txt","media_type":"text/plain","url":"file:///home/ann/notes.txt","size":12},{"name":"bare"}]`
	rid := h.Start(protocol.StartRunRequest{Message: "look", Profile: "cmd", Attachments: atts}).RunID
	ev := h.Events(rid, 10*time.Second)
	drivertest.Terminal(t, ev, protocol.EventDone)
	rid2 := start(h, ev[0].SessionID, "again")
	drivertest.Terminal(t, h.Events(rid2, 10*time.Second), protocol.EventDone)

	lines := strings.Split(strings.TrimSpace(read(t, filepath.Join(out, "start.json"))), "\n")
	if len(lines) != 2 {
		t.Fatalf("start lines: %q", lines)
	}
	var first, second map[string]json.RawMessage
	if json.Unmarshal([]byte(lines[0]), &first) != nil || json.Unmarshal([]byte(lines[1]), &second) != nil {
		t.Fatalf("start lines: %q", lines)
	}
	if got := string(first["attachments"]); got != wantAtts {
		t.Errorf("first start line's attachments\n got %s\nwant %s", got, wantAtts)
	}
	if _, ok := second["attachments"]; ok {
		t.Errorf("a start without attachments has an attachments field: %s", lines[1])
	}
	wantHistory := `[{"role":"user","content":"look","attachments":` + wantAtts + `},{"role":"assistant","content":"ok"}]`
	if got := string(second["history"]); got != wantHistory {
		t.Errorf("second start line's history\n got %s\nwant %s", got, wantHistory)
	}
}
