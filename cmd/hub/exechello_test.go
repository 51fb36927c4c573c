package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/protocol"
)

// An exec command that says in its hello line it can cancel, queue and
// report usage only: its run's pending approval is not offered in
// active_controls, an approve is answered unsupported naming approval,
// GET /v1/profiles drops approval, and a cancel (which it has) still ends
// the run.
func TestProcess_ExecHelloNarrowsCapabilities(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(script, []byte(`IFS= read -r start
echo '{"type":"hello","payload":{"capabilities":["cancel","queue","usage"]}}'
echo '{"type":"approval.requested","payload":{"approval_id":"a1","summary":"rm -rf","risk":"high","choices":["once","deny"]}}'
while IFS= read -r line; do
  case "$line" in *cancel*) echo '{"type":"cancelled","payload":{"reason":"asked"}}'; exit 0;; esac
done
`), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "profiles.json")
	body := fmt.Sprintf(`{"default": "cmd", "profiles": {"cmd": {"driver": "exec", "command": "/bin/sh", "args": [%q]}}}`, script)
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startHub(t, t.TempDir(), "RUNHUB_PROFILES="+file)
	var sess protocol.SessionStatus
	if code := call(t, "POST", p.URL()+"/v1/sessions", map[string]any{}, &sess); code/100 != 2 {
		t.Fatalf("create session: %d", code)
	}
	var run protocol.RunStartResult
	if code := call(t, "POST", p.URL()+"/v1/sessions/"+sess.SessionID+"/runs", map[string]any{"message": "go", "profile": "cmd"}, &run); code != 202 {
		t.Fatalf("start: %d", code)
	}
	var st protocol.RunStatus
	deadline := time.Now().Add(10 * time.Second)
	for {
		st = protocol.RunStatus{}
		call(t, "GET", p.URL()+"/v1/runs/"+run.RunID, nil, &st)
		if st.PendingApprovalID != "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(30 * time.Millisecond)
	}
	if st.PendingApprovalID == "" {
		t.Fatalf("no pending approval: %+v", st)
	}
	if slices.Contains(st.ActiveControls, protocol.OpApprove) || !slices.Contains(st.ActiveControls, protocol.OpCancel) {
		t.Errorf("active_controls %v: want cancel, not approve", st.ActiveControls)
	}
	code, ans := httpBody(t, "POST", p.URL()+"/v1/runs/"+run.RunID+"/approvals/a1", `{"choice":"once"}`)
	if code != http.StatusNotImplemented || !strings.Contains(string(ans), `"unsupported"`) ||
		!strings.Contains(string(ans), `profile \"cmd\" cannot do approval`) {
		t.Errorf("approve: %d %s, want 501 unsupported naming approval", code, ans)
	}
	code, ans = httpBody(t, "GET", p.URL()+"/v1/profiles", "")
	if code != 200 || !strings.Contains(string(ans), `"capabilities":["cancel","queue","usage"]`) {
		t.Errorf("GET /v1/profiles: %d %s, want cmd's capabilities [cancel queue usage]", code, ans)
	}
	if code, ans := httpBody(t, "POST", p.URL()+"/v1/runs/"+run.RunID+"/cancel", `{}`); code/100 != 2 {
		t.Fatalf("cancel: %d %s", code, ans)
	}
	waitRunEnd(t, p.URL(), run.RunID)
}
