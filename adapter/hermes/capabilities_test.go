package hermes_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/adapter/hermes"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/protocol"
)

// capsRuntime rebuilds h's runtime as the binary wires it: a profile file
// with one hermes profile at the fake, its drivers built by the registry,
// the executor refusing and the router's run statuses not offering what
// the profile's capabilities lack. It returns the configuration.
func capsRuntime(t *testing.T, h *harness, options string) *profile.Config {
	t.Helper()
	reg := profile.NewRegistry(hermes.Registration())
	c, err := profile.Parse([]byte(`{"default": "agent", "profiles": {"agent": {"driver": "hermes", "base_url": "`+
		h.fake.srv.URL+`", "api_key_env": "HERMES_KEY", "options": {`+options+`}}}}`), reg)
	if err != nil {
		t.Fatal(err)
	}
	built, err := c.Build(profile.Env{Getenv: func(string) string { return testKey }, Logger: h.logger})
	if err != nil {
		t.Fatal(err)
	}
	h.exec.Close()
	h.exec = executor.New(h.store, executor.Options{Profiles: built, DefaultProfile: "agent",
		Capabilities: c.Capabilities, Logger: h.logger})
	h.rt = adapter.NewRouter(h.store, h.exec, nil).WithCapabilities(c.Capabilities)
	return c
}

// publicCaps is the agent profile's capabilities as GET /v1/profiles
// encodes them.
func publicCaps(t *testing.T, c *profile.Config) []string {
	t.Helper()
	raw, err := json.Marshal(c.Public())
	if err != nil {
		t.Fatal(err)
	}
	var infos []struct {
		Name         string   `json:"name"`
		Capabilities []string `json:"capabilities"`
	}
	json.Unmarshal(raw, &infos)
	for _, i := range infos {
		if i.Name == "agent" {
			return i.Capabilities
		}
	}
	t.Fatalf("no agent profile in %s", raw)
	return nil
}

// A Hermes profile has what its server reports on GET /v1/capabilities,
// mapped: 0.18.x's features give cancel, approval, queue, reasoning,
// usage and tools, and never clarify (the runs API has none) nor steer
// (no run_steer). A server that turns approval off, or stop off, loses
// approval or cancel: GET /v1/profiles follows the next read, a run
// waiting on an approval no longer offers approve or cancel in its
// active_controls, and a control that needs it is answered unsupported
// naming it, with nothing sent to Hermes.
func TestCapabilities_FromTheServer(t *testing.T) {
	approved := make(chan struct{})
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		deltas(s, "working")
		if n == 1 {
			s.event("approval.request", map[string]any{"command": "rm -rf build", "description": "clean", "choices": []string{"once", "deny"}})
			fr.wait(s.t(), fr.approvals, "approval")
			close(approved)
		} else {
			s.event("approval.request", map[string]any{"command": "rm -rf dist", "description": "clean", "choices": []string{"once", "deny"}})
			s.hold(fr, 0)
			return
		}
		completed(s, "working")
	}, nil)
	c := capsRuntime(t, h, `"capabilities_refresh": "50ms"`)
	want018 := []string{"cancel", "approval", "queue", "reasoning", "usage", "tools"}
	if got, _ := c.Capabilities("agent", ""); !slices.Equal(got, want018) {
		t.Fatalf("capabilities of a 0.18.x server %v, want %v", got, want018)
	}
	if got := publicCaps(t, c); !slices.Equal(got, want018) {
		t.Errorf("GET /v1/profiles capabilities %v, want %v", got, want018)
	}

	// Approval on: the approve reaches Hermes.
	res := h.start("", "clean up")
	ch := h.watch(res.RunID)
	req := payload[protocol.ApprovalRequestedPayload](h.until(ch, protocol.EventApprovalReq))
	offers(t, h, res.RunID, protocol.OpCancel, protocol.OpApprove)
	r, err := h.control(context.Background(), protocol.Control{Op: protocol.OpApprove, RunID: res.RunID, ApprovalID: req.ApprovalID, Choice: "once"})
	if err != nil || !r.Accepted {
		t.Fatalf("approve %+v %v", r, err)
	}
	<-approved
	h.finish(res.RunID)

	// The server turns approval and stop off: the profile follows.
	h.fake.setFeatures(func(f map[string]any) { f["run_approval_response"] = false; f["run_stop"] = false })
	want := []string{"queue", "reasoning", "usage", "tools"}
	waitCaps(t, c, want)
	if got := publicCaps(t, c); !slices.Equal(got, want) {
		t.Errorf("GET /v1/profiles capabilities %v, want %v", got, want)
	}
	res = h.start(res.SessionID, "clean again")
	ch = h.watch(res.RunID)
	req = payload[protocol.ApprovalRequestedPayload](h.until(ch, protocol.EventApprovalReq))
	offers(t, h, res.RunID)
	for _, tc := range []struct {
		m    protocol.Control
		need string
	}{
		{protocol.Control{Op: protocol.OpApprove, RunID: res.RunID, ApprovalID: req.ApprovalID, Choice: "once"}, "approval"},
		{protocol.Control{Op: protocol.OpCancel, RunID: res.RunID}, "cancel"},
		{protocol.Control{Op: protocol.OpQueue, SessionID: res.SessionID, Message: "and tests", Mode: protocol.ModeSteer}, "steer"},
	} {
		r, err := h.control(context.Background(), tc.m)
		if err != nil || r.Status != protocol.ResultUnsupported || !strings.Contains(r.Message, "cannot do "+tc.need) {
			t.Errorf("%s: %+v %v, want unsupported naming %s", tc.m.Op, r, err, tc.need)
		}
	}
	fr := h.fake.onlyRunN(t, 2)
	if len(fr.approvals) != 0 || fr.stopCount() != 0 || h.fake.absentCalls() != 0 {
		t.Errorf("an unsupported control reached Hermes: %d approvals, %d stops, %d requests to routes it lacks",
			len(fr.approvals), fr.stopCount(), h.fake.absentCalls())
	}
	h.exec.Close() // ends the held run (interrupted) for the cleanup
}

// offers fails the test unless the run, waiting on an approval, offers
// exactly want in its RunStatus active_controls (GET /v1/runs/{id}).
func offers(t *testing.T, h *harness, runID string, want ...string) {
	t.Helper()
	st, err := h.rt.GetRun(context.Background(), runID)
	if err != nil || st.Status != protocol.StatusAwaitingApproval || !slices.Equal(st.ActiveControls, append([]string{}, want...)) {
		t.Fatalf("run status %+v (%v): active_controls %v, want %v", st, err, st.ActiveControls, want)
	}
}

// waitCaps waits until the agent profile's capabilities are want (each
// read past the refresh interval asks the server again, in the
// background).
func waitCaps(t *testing.T, c *profile.Config, want []string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, _ := c.Capabilities("agent", "")
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("capabilities %v, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A Hermes older than GET /v1/capabilities (404) has the conservative
// set, logged: cancel, queue, reasoning, usage, tools; no approval, no
// steer, no clarify. Its runs run.
func TestCapabilities_NoEndpoint(t *testing.T) {
	h := newHarness(t, func(fr *fakeRun, n, sub int, s *sseWriter) {
		deltas(s, "hi")
		completed(s, "hi")
	}, nil)
	h.fake.noCapabilities = true
	c := capsRuntime(t, h, "")
	want := []string{"cancel", "queue", "reasoning", "usage", "tools"}
	if got, _ := c.Capabilities("agent", ""); !slices.Equal(got, want) {
		t.Fatalf("capabilities %v, want the conservative %v", got, want)
	}
	if !strings.Contains(h.logs.String(), "no GET /v1/capabilities") {
		t.Errorf("the fallback is not logged:\n%s", h.logs.String())
	}
	if evs := h.finish(h.start("", "hello").RunID); terminal(evs).Type != protocol.EventDone {
		t.Fatalf("terminal %s", terminal(evs).Type)
	}
	if n := h.fake.capabilitiesCalls(); n != 1 {
		t.Errorf("GET /v1/capabilities asked %d times within the refresh interval, want 1", n)
	}
}

// A server with run_steer takes guidance: steer is among its
// capabilities. One without run_submission can run nothing.
func TestCapabilities_Mapping(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(map[string]any)
		want   []string
	}{
		{"0.18.x", func(map[string]any) {}, []string{"cancel", "approval", "queue", "reasoning", "usage", "tools"}},
		{"run_steer", func(f map[string]any) { f["run_steer"] = true }, []string{"cancel", "approval", "steer", "queue", "reasoning", "usage", "tools"}},
		{"no approval events", func(f map[string]any) { f["approval_events"] = false }, []string{"cancel", "queue", "reasoning", "usage", "tools"}},
		{"no tool progress", func(f map[string]any) { f["tool_progress_events"] = false }, []string{"cancel", "approval", "queue", "reasoning", "usage"}},
		{"no run submission", func(f map[string]any) { f["run_submission"] = false }, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil, nil)
			h.fake.setFeatures(tc.change)
			c := capsRuntime(t, h, "")
			if got, _ := c.Capabilities("agent", ""); !slices.Equal(got, tc.want) {
				t.Errorf("capabilities %v, want %v", got, tc.want)
			}
		})
	}
}
