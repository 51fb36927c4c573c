package hermeswebui_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/hermeswebui"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/internal/webuiclient"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// hermes-webui's start with attachments on a profile whose driver takes
// none is refused 501 unsupported before the WebUI session is made; the
// same start without attachments runs.
func TestWebUIStart_AttachmentsUnsupported(t *testing.T) {
	noAttachments := func(profile, provider string) ([]string, bool) {
		return []string{protocol.CapCancel, protocol.CapQueue, protocol.CapUsage}, true
	}
	th := newWebUIHub(t, hub.Config{Capabilities: noAttachments}, hermeswebui.RunnerOptions{})
	c := webuiclient.New(th.runner, "")
	ctx := hubtest.Ctx(t, 30*time.Second)
	req := webuiclient.StartRunRequest{SessionID: "f00dfeed0001", Message: "read this", Profile: ptr("default"),
		Attachments: []map[string]any{{"name": "log.txt", "path": "/tmp/log.txt", "mime": "text/plain", "size": 12}},
		Metadata:    simMeta(map[string]any{"tokens": 1, "token_ms": 1})}
	_, err := c.StartRun(ctx, req)
	var we *webuiclient.Error
	if !errors.As(err, &we) || we.Status != http.StatusNotImplemented || !strings.Contains(we.Msg, "attachments") {
		t.Fatalf("start with attachments: %v, want 501 naming attachments", err)
	}
	if _, err := th.Store.Session(context.Background(), req.SessionID); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("the refused start made the session: %v", err)
	}
	req.Attachments = nil
	st, err := c.StartRun(ctx, req)
	if err != nil || st.RunID == "" {
		t.Fatalf("start without attachments: %+v %v", st, err)
	}
	hubtest.Terminal(t, th.Hub, st.RunID)
}

// hermes-webui's attachment objects carry the path where it stored the
// upload: on a profile that takes attachments the start keeps it, as the
// attachment's file:// URL, beside name, mime and size; a bare file name
// stays a name.
func TestWebUIStart_AttachmentPathKept(t *testing.T) {
	th := newWebUIHub(t, hub.Config{}, hermeswebui.RunnerOptions{})
	c := webuiclient.New(th.runner, "")
	ctx := hubtest.Ctx(t, 30*time.Second)
	st, err := c.StartRun(ctx, webuiclient.StartRunRequest{SessionID: "f00dfeed0002", Message: "read this", Profile: ptr("default"),
		Attachments: []map[string]any{{"name": "log.txt", "path": "/home/ann/proj/uploads/log.txt", "mime": "text/plain", "size": 12}},
		Metadata:    simMeta(map[string]any{"tokens": 1, "token_ms": 1})})
	if err != nil {
		t.Fatal(err)
	}
	req := endedRunRequest(t, th.Hub, st.RunID)
	want := protocol.Attachment{Name: "log.txt", MediaType: "text/plain", URL: "file:///home/ann/proj/uploads/log.txt", Size: 12}
	if len(req.Attachments) != 1 || req.Attachments[0] != want {
		t.Fatalf("the run's attachments %+v, want [%+v]", req.Attachments, want)
	}
}

// hermes-webui sends its default workspace with every start. On a profile
// whose driver takes no workspace the start is neither refused nor the
// workspace passed on: the run's request has none (what its driver
// receives) and keeps it in metadata.hermes_webui.workspace. On a profile
// that takes one, the run gets it.
func TestWebUIStart_WorkspaceKeptNotPassed(t *testing.T) {
	var takes atomic.Bool
	caps := func(profile, provider string) ([]string, bool) {
		if takes.Load() {
			return []string{protocol.CapCancel, protocol.CapWorkspace}, true
		}
		return []string{protocol.CapCancel, protocol.CapQueue, protocol.CapUsage}, true
	}
	th := newWebUIHub(t, hub.Config{Capabilities: caps}, hermeswebui.RunnerOptions{})
	c := webuiclient.New(th.runner, "")
	ctx := hubtest.Ctx(t, 30*time.Second)
	request := func(sid string) protocol.StartRunRequest {
		t.Helper()
		st, err := c.StartRun(ctx, webuiclient.StartRunRequest{SessionID: sid, Message: "build", Profile: ptr("default"),
			Workspace: ptr("/home/ann/proj"), Metadata: simMeta(map[string]any{"tokens": 1, "token_ms": 1})})
		if err != nil {
			t.Fatalf("start with a workspace (driver takes it: %v): %v", takes.Load(), err)
		}
		return endedRunRequest(t, th.Hub, st.RunID)
	}
	req := request("f00dfeed0003")
	var md struct {
		WebUI struct {
			Workspace string `json:"workspace"`
		} `json:"hermes_webui"`
	}
	json.Unmarshal(req.Metadata, &md)
	if req.Workspace != "" || md.WebUI.Workspace != "/home/ann/proj" {
		t.Fatalf("no workspace capability: the run's workspace %q, metadata %s; want none, and it in hermes_webui.workspace",
			req.Workspace, req.Metadata)
	}
	takes.Store(true)
	if req := request("f00dfeed0004"); req.Workspace != "/home/ann/proj" || strings.Contains(string(req.Metadata), "workspace") {
		t.Fatalf("workspace capability: the run's workspace %q, metadata %s", req.Workspace, req.Metadata)
	}
}

// endedRunRequest waits for runID's end and returns the start request its
// meta keeps (what its driver was given).
func endedRunRequest(t *testing.T, th *hubtest.Hub, runID string) protocol.StartRunRequest {
	t.Helper()
	hubtest.Terminal(t, th, runID)
	meta, err := th.Store.Run(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	var req protocol.StartRunRequest
	if err := json.Unmarshal(meta.Request, &req); err != nil {
		t.Fatalf("run request %s: %v", meta.Request, err)
	}
	return req
}
