package agui_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	aguidrv "github.com/runhub/runhub/adapter/agui"
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/agui"
	"github.com/runhub/runhub/hub/httpapi"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/protocol"
)

// weatherAgent is an AG-UI agent (served as @ag-ui/encoder serves one):
// its first run says a sentence, calls weather (with its result) and asks
// approval for book; the continuing run (resume) gets the answer, books,
// and says so.
func weatherAgent(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			ThreadID, RunID string
			Resume          []struct {
				InterruptID string          `json:"interruptId"`
				Payload     json.RawMessage `json:"payload"`
			}
		}
		body, _ := io.ReadAll(r.Body)
		if json.Unmarshal(body, &in) != nil {
			http.Error(w, "bad input", http.StatusUnprocessableEntity)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(events ...string) {
			for _, e := range events {
				fmt.Fprintf(w, "data: %s\n\n", e)
			}
			w.(http.Flusher).Flush()
		}
		send(fmt.Sprintf(`{"type":"RUN_STARTED","threadId":%q,"runId":%q}`, in.ThreadID, in.RunID))
		finish := func(outcome string) {
			send(fmt.Sprintf(`{"type":"RUN_FINISHED","threadId":%q,"runId":%q,"outcome":%s}`, in.ThreadID, in.RunID, outcome))
		}
		if len(in.Resume) == 0 {
			send(`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Let me "}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"check."}`,
				`{"type":"TEXT_MESSAGE_END","messageId":"m1"}`,
				`{"type":"TOOL_CALL_START","toolCallId":"tc1","toolCallName":"weather","parentMessageId":"m1"}`,
				`{"type":"TOOL_CALL_ARGS","toolCallId":"tc1","delta":"{\"city\":\"Oslo\"}"}`,
				`{"type":"TOOL_CALL_END","toolCallId":"tc1"}`,
				`{"type":"TOOL_CALL_RESULT","messageId":"tr1","toolCallId":"tc1","content":"sunny","role":"tool"}`,
				`{"type":"TOOL_CALL_START","toolCallId":"tc2","toolCallName":"book"}`,
				`{"type":"TOOL_CALL_ARGS","toolCallId":"tc2","delta":"{\"trip\":\"Oslo\"}"}`,
				`{"type":"TOOL_CALL_END","toolCallId":"tc2"}`)
			finish(`{"type":"interrupt","interrupts":[{"id":"ok-book","reason":"tool_call","toolCallId":"tc2","message":"Book a trip to Oslo?"}]}`)
			return
		}
		result := "not booked"
		if string(in.Resume[0].Payload) == `{"approved":true}` {
			result = "booked"
		}
		send(`{"type":"TOOL_CALL_RESULT","messageId":"tr2","toolCallId":"tc2","content":"`+result+`","role":"tool"}`,
			`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m2","delta":"Trip "}`,
			`{"type":"TEXT_MESSAGE_CHUNK","delta":"`+result+`."}`)
		finish(`{"type":"success"}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The round trip: a run of an AG-UI agent behind the agui driver, read
// back through runhub's own AG-UI export with the official client
// (check.mjs: @ag-ui/client's transport and verifier, @ag-ui/core's
// schemas), gives back the agent's messages and tool calls (ids
// namespaced by the run), their results, and the approval in between.
func TestAGUI_DriverRoundTrip(t *testing.T) {
	node, dir := installAGUI(t)
	agent := weatherAgent(t)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	d, err := aguidrv.New(aguidrv.Config{URL: agent.URL, Client: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	th := hubtest.Serve(t, hub.Config{}, hubtest.Options{
		Adapter: executor.Options{Drivers: map[string]driver.Driver{"sim": &sim.Driver{}},
			Profiles: map[string]driver.Profile{"ag": {Driver: d, Kind: aguidrv.Kind}}},
		Edges: []hub.Edge{httpapi.New(nil), agui.New()},
	})
	var sess protocol.CreateSessionResult
	hubtest.Do(t, "POST", th.URL+"/v1/sessions", `{"title":"trip"}`, nil, &sess)
	var r protocol.RunStartResult
	hubtest.Do(t, "POST", th.URL+"/v1/sessions/"+sess.SessionID+"/runs", `{"message":"book me a sunny trip","profile":"ag"}`, nil, &r)
	wait := runAGUICheck(t, node, dir, th.URL+"/v1/runs/"+r.RunID+"/agui", 1, "")
	ap := hubtest.Payload[protocol.ApprovalRequestedPayload](t, hubtest.WaitEvent(t, th, r.RunID, "approval", hubtest.IsType(protocol.EventApprovalReq)))
	if ap.ApprovalID != "ok-book" || ap.Summary != "Book a trip to Oslo?" {
		t.Fatalf("approval %+v", ap)
	}
	hubtest.PostOK(t, th.URL+"/v1/runs/"+r.RunID+"/approvals/"+ap.ApprovalID, `{"choice":"approve"}`)
	s := wait()

	if len(s.Runs) != 1 || s.Runs[0].RunID != r.RunID || s.Runs[0].ThreadID != sess.SessionID || s.Runs[0].End != "RUN_FINISHED:success" {
		t.Fatalf("runs %+v", s.Runs)
	}
	id := func(x string) string { return agui.ID(r.RunID, x) }
	if want := map[string]string{id("m1"): "Let me check.", id("m2"): "Trip booked."}; !reflect.DeepEqual(s.Texts, want) {
		t.Errorf("messages %q, want the agent's %q", s.Texts, want)
	}
	tools := map[string][2]string{}
	for k, v := range s.Tools {
		tools[k] = [2]string{v.Name, v.Args}
	}
	if want := map[string][2]string{id("tc1"): {"weather", `{"city":"Oslo"}`}, id("tc2"): {"book", `{"trip":"Oslo"}`}}; !reflect.DeepEqual(tools, want) {
		t.Errorf("tool calls %v, want the agent's %v", tools, want)
	}
	if want := map[string]string{id("tc1"): "sunny", id("tc2"): "booked"}; !reflect.DeepEqual(s.Results, want) {
		t.Errorf("results %v, want %v", s.Results, want)
	}
	expectAGUI(t, th, r.RunID, &s)
	if n := countOf(s.Custom, agui.CustomPrefix+string(protocol.EventApprovalReq)); n != 1 {
		t.Errorf("%d approvals in %v", n, s.Custom)
	}
	hubtest.WaitTerminal(t, th, r.RunID)
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// Full circle: an AG-UI client (HttpAgent.runAgent, run.mjs) drives an
// agui-driven run through runhub's own AG-UI run endpoint. The agent's
// interrupt is runhub's approval, which the endpoint ends the client's
// AG-UI run with as an interrupt; the client's resume answers it, and the
// agent's continuing run finishes the one runhub run.
func TestAGUI_DriverFullCircle(t *testing.T) {
	node, dir := installAGUI(t)
	agent := weatherAgent(t)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	d, err := aguidrv.New(aguidrv.Config{URL: agent.URL, Client: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	th := hubtest.Serve(t, hub.Config{}, hubtest.Options{
		Adapter: executor.Options{Drivers: map[string]driver.Driver{"sim": &sim.Driver{}},
			Profiles: map[string]driver.Profile{"ag": {Driver: d, Kind: aguidrv.Kind}}},
		Edges: []hub.Edge{httpapi.New(nil), agui.New()},
	})
	s := runAGUIRun(t, node, dir, nil, "agent", th.URL+"/v1/agui/ag", "t-circle", "book me a sunny trip")
	if len(s.Runs) != 2 || s.Runs[0].End != "RUN_FINISHED:interrupt" || s.Runs[1].End != "RUN_FINISHED:success" ||
		s.Runs[0].RunhubRun == "" || s.Runs[1].RunhubRun != s.Runs[0].RunhubRun {
		t.Fatalf("AG-UI runs %+v", s.Runs)
	}
	if len(s.Runs[0].Interrupts) != 1 || s.Runs[0].Interrupts[0]["id"] != "ok-book" || s.Runs[0].Interrupts[0]["message"] != "Book a trip to Oslo?" {
		t.Fatalf("interrupts %+v", s.Runs[0].Interrupts)
	}
	rid := s.Runs[0].RunhubRun
	id := func(x string) string { return agui.ID(rid, x) }
	if want := map[string]string{id("m1"): "Let me check.", id("m2"): "Trip booked."}; !reflect.DeepEqual(s.Texts, want) {
		t.Errorf("messages %q, want %q", s.Texts, want)
	}
	if want := map[string]string{id("tc1"): "weather", id("tc2"): "book"}; !reflect.DeepEqual(s.Tools, want) {
		t.Errorf("tools %v, want %v", s.Tools, want)
	}
	if want := map[string]string{id("tc1"): "sunny", id("tc2"): "booked"}; !reflect.DeepEqual(s.Results, want) {
		t.Errorf("results %v, want %v", s.Results, want)
	}
	ev := hubtest.JournalEvents(t, th, rid)
	if e := ev[len(ev)-1]; e.Type != protocol.EventDone {
		t.Fatalf("the runhub run ended %s", e.Type)
	}
}
