package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/protocol"
)

// hermesKey is the fake Hermes server's API_SERVER_KEY; no redaction
// pattern recognizes it.
const hermesKey = "hx4Tq8Lm2Wc6Zr9Bv3Np"

// fakeHermesServer is a Hermes Agent API server (/v1/runs) that streams one
// run: a token, an approval request it waits on (POST /approval), the
// echo, another token, run.completed. It records every start body, and
// the run id of every POST /stop (answered {status: "stopping"}).
func fakeHermesServer(t *testing.T) (*httptest.Server, func() []map[string]any, func() []string) {
	return fakeHermes(t, true)
}

// fakeHermes is fakeHermesServer; without approval its run asks none and
// streams both tokens straight to run.completed.
func fakeHermes(t *testing.T, approval bool) (*httptest.Server, func() []map[string]any, func() []string) {
	var mu sync.Mutex
	var starts []map[string]any
	var stops []string
	approvals := map[string]chan string{}
	authed := func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("Authorization") != "Bearer "+hermesKey {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":{"message":"Invalid API key","code":"invalid_api_key"}}`)
			return false
		}
		return true
	}
	mux := http.NewServeMux()
	serveHermesCapabilities(mux, hermesKey, nil)
	mux.HandleFunc("POST /v1/runs", func(w http.ResponseWriter, r *http.Request) {
		if !authed(w, r) {
			return
		}
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		starts = append(starts, body)
		id := fmt.Sprintf("run_%032x", len(starts))
		approvals[id] = make(chan string, 1)
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		json.NewEncoder(w).Encode(map[string]any{"run_id": id, "status": "started"})
	})
	mux.HandleFunc("POST /v1/runs/{id}/stop", func(w http.ResponseWriter, r *http.Request) {
		if !authed(w, r) {
			return
		}
		mu.Lock()
		stops = append(stops, r.PathValue("id"))
		mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"run_id": r.PathValue("id"), "status": "stopping"})
	})
	mux.HandleFunc("POST /v1/runs/{id}/approval", func(w http.ResponseWriter, r *http.Request) {
		if !authed(w, r) {
			return
		}
		var body map[string]string
		json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		ch := approvals[r.PathValue("id")]
		mu.Unlock()
		ch <- body["choice"]
		json.NewEncoder(w).Encode(map[string]any{"choice": body["choice"], "resolved": 1})
	})
	mux.HandleFunc("GET /v1/runs/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		if !authed(w, r) {
			return
		}
		id := r.PathValue("id")
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(name string, fields map[string]any) {
			m := map[string]any{"event": name, "run_id": id, "timestamp": 1778750000.0}
			for k, v := range fields {
				m[k] = v
			}
			b, _ := json.Marshal(m)
			fmt.Fprintf(w, "data: %s\n\n", b)
			w.(http.Flusher).Flush()
		}
		send("message.delta", map[string]any{"delta": "Checking. "})
		if approval {
			send("approval.request", map[string]any{"command": "make clean", "description": "remove build output",
				"choices": []string{"once", "deny"}, "request_id": "req_1"})
			mu.Lock()
			ch := approvals[id]
			mu.Unlock()
			var choice string
			select {
			case choice = <-ch:
			case <-r.Context().Done():
				return
			case <-time.After(30 * time.Second):
				return
			}
			send("approval.responded", map[string]any{"choice": choice, "request_id": "req_1", "resolved": 1})
		}
		send("message.delta", map[string]any{"delta": "Cleaned."})
		send("run.completed", map[string]any{"output": "Checking. Cleaned.",
			"usage": map[string]any{"input_tokens": 9, "output_tokens": 3, "total_tokens": 12}})
		fmt.Fprint(w, ": stream closed\n\n")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, func() []map[string]any {
			mu.Lock()
			defer mu.Unlock()
			return append([]map[string]any(nil), starts...)
		}, func() []string {
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), stops...)
		}
}

func hermesProfiles(t *testing.T, baseURL string) []string {
	file := filepath.Join(t.TempDir(), "profiles.json")
	body := fmt.Sprintf(`{"default": "hermes", "profiles": {"hermes": {"driver": "hermes", "base_url": %q, "api_key_env": "RUNHUB_TEST_HERMES_KEY"}}}`, baseURL)
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"RUNHUB_PROFILES=" + file, "RUNHUB_TEST_HERMES_KEY=" + hermesKey, "RUNHUB_LOG_LEVEL=debug"}
}

// hermesRun starts a run in sid (a new session when empty) with the hermes
// profile, approves its approval from the tab and returns its events.
func hermesRun(t *testing.T, ctx context.Context, tab *rawTab, id, sid, message string) []protocol.Envelope {
	t.Helper()
	c := map[string]any{"op": "start", "message": message, "profile": "hermes"}
	if sid != "" {
		c["session_id"] = sid
	}
	typ, m := tab.control(ctx, id, c)
	var res protocol.ControlResult
	json.Unmarshal(m, &res)
	if typ != "control_result" || !res.Accepted {
		t.Fatalf("start: %s", m)
	}
	tab.send(ctx, map[string]any{"type": "focus", "session_id": res.SessionID})
	var out []protocol.Envelope
	approveID := id + "-approve"
	for {
		// Events and the approve's answer, which may arrive after the
		// events it caused: neither is skipped while waiting for the other.
		var kind string
		m := tab.next(ctx, func(typ string, _ json.RawMessage) bool {
			kind = typ
			return typ == "event" || typ == "control_result" || typ == "error"
		})
		if kind != "event" {
			if !strings.Contains(string(m), `"id":"`+approveID+`"`) && !strings.Contains(string(m), `"ref":"`+approveID+`"`) {
				continue
			}
			if kind != "control_result" || !strings.Contains(string(m), `"accepted":true`) {
				t.Fatalf("approve: %s", m)
			}
			continue
		}
		var em struct {
			Event protocol.Envelope `json:"event"`
		}
		json.Unmarshal(m, &em)
		e := em.Event
		// The start's answer may come after the run's first live events,
		// which tab.control skipped; the focus that follows restarts from
		// seq 1. Keep the events in seq order, each once.
		if e.RunID != res.RunID || e.Seq != uint64(len(out))+1 {
			continue
		}
		out = append(out, e)
		if e.Type == protocol.EventApprovalReq {
			p, _ := protocol.DecodePayload[protocol.ApprovalRequestedPayload](&e)
			tab.send(ctx, map[string]any{"type": "control", "id": approveID, "op": "approve", "run_id": res.RunID,
				"approval_id": p.ApprovalID, "choice": "once"})
		}
		if e.Terminal {
			return out
		}
	}
}

// checkHermesRun checks a run mapped from the fake Hermes server: the
// approval round trip with one resolution, the text, done.
func checkHermesRun(t *testing.T, ev []protocol.Envelope, logs string) {
	t.Helper()
	var types []string
	for _, e := range ev {
		types = append(types, string(e.Type))
	}
	want := "run.started progress token.delta approval.requested approval.resolved token.delta usage.final done"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("events %s, want %s\nlogs:\n%s", got, want, logs)
	}
	if tokenText(ev) != "Checking. Cleaned." {
		t.Errorf("text %q", tokenText(ev))
	}
	rs, _ := protocol.DecodePayload[protocol.RunStartedPayload](&ev[0])
	if rs.Profile != "hermes" || rs.Provider != "hermes" {
		t.Errorf("run.started %+v", rs)
	}
}

// The hermes profile in a hub process: two turns of a session, each with an
// approval answered from the tab; the second sends the first as
// conversation_history; the key reaches neither the journal file, the
// logs nor a frame.
func TestProcess_Hermes(t *testing.T) {
	upstream, starts, _ := fakeHermesServer(t)
	data := t.TempDir()
	p := startHub(t, data, hermesProfiles(t, upstream.URL)...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tab := dialRaw(t, ctx, "ws://"+p.addr+"/v1/ws")

	ev := hermesRun(t, ctx, tab, "c1", "", "clean the build")
	checkHermesRun(t, ev, p.out.String())
	ev = hermesRun(t, ctx, tab, "c2", ev[0].SessionID, "again")
	checkHermesRun(t, ev, p.out.String())
	hist, _ := json.Marshal(starts()[1]["conversation_history"])
	if want := `[{"content":"clean the build","role":"user"},{"content":"Checking. Cleaned.","role":"assistant"}]`; string(hist) != want {
		t.Errorf("conversation_history %s, want %s", hist, want)
	}
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	journalBytes := embeddedJournalBytes(t, data)
	for where, b := range map[string][]byte{"the journal (its file and event log)": journalBytes, "the logs": []byte(p.out.String()), "a frame": tab.allFrames()} {
		if bytes.Contains(b, []byte(hermesKey)) {
			t.Errorf("the Hermes key is in %s", where)
		}
	}
}

// The hermes profile in runner mode: the run executes in a runner, the
// approval travels from the hub's tab to the runner over the control
// stream, and the runner posts it to Hermes.
func TestRunners_Hermes(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	upstream, _, _ := fakeHermesServer(t)
	env := append([]string{"RUNHUB_REDIS_URL=" + rs.URL(), "RUNHUB_LEASE_TTL=2s"}, hermesProfiles(t, upstream.URL)...)
	p := startHub(t, t.TempDir(), env...)
	r := startRunner(t, env...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tab := dialRaw(t, ctx, "ws://"+p.addr+"/v1/ws")
	ev := hermesRun(t, ctx, tab, "c1", "", "clean the build")
	checkHermesRun(t, ev, p.out.String()+r.out.String())
	if !strings.Contains(r.out.String(), "Hermes run started") {
		t.Errorf("the run did not execute in the runner:\n%s", r.out.String())
	}
	if strings.Contains(p.out.String()+r.out.String(), hermesKey) || bytes.Contains(tab.allFrames(), []byte(hermesKey)) {
		t.Error("the Hermes key is in the logs or a frame")
	}
}
