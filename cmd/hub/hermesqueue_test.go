package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// queueHermes is a Hermes Agent API server's /v1/runs as Hermes Agent
// 0.18.x serves it (gateway/platforms/api_server.py), for the tests of a
// hub restarting under a run:
//
//   - POST /v1/runs registers the run's one event queue (_run_streams) and
//     starts its agent (the test's script); 202 {run_id, status: started}.
//   - The agent's text (message.delta) and its end (run.completed,
//     run.cancelled, then the sentinel) go to that queue whether or not it
//     is registered; tool events only while it is (_push looks it up).
//   - GET /v1/runs/{id}/events waits up to 1 s for the queue to be
//     registered, else 404 run_not_found; it writes each event as it takes
//     it, `: keepalive` after 30 s without one, `: stream closed` at the
//     sentinel, and unregisters the queue when it ends. A subscriber that
//     went away is noticed only at the handler's next write: the event it
//     took then is lost, and the queue unregistered — so a subscriber that
//     comes back gets 404, or, before that write, shares the queue.
//   - GET /v1/runs/{id} answers the status: running, waiting_for_approval,
//     completed {output, usage}, failed {error}, cancelled; 404
//     run_not_found for a run it does not know (forget: Hermes restarted).
//   - POST /v1/runs/{id}/stop cancels a run whose agent is still going
//     ({status: stopping}); 404 run_not_found otherwise.
//   - POST /v1/runs/{id}/approval resolves the approval the agent waits on
//     and sets the status back to running; 409 when none waits.
type queueHermes struct {
	t      *testing.T
	srv    *httptest.Server
	script func(r *qhRun) // the agent of each run; returns when it ended
	done   chan struct{}  // closed at cleanup: handlers return

	mu    sync.Mutex
	runs  map[string]*qhRun
	n     int
	stops []string
}

// qhItem is one entry of a run's queue: an event, or the sentinel.
type qhItem struct {
	ev  map[string]any
	end bool
}

type qhRun struct {
	h        *queueHermes
	id       string
	q        chan qhItem
	stop     chan struct{} // closed by POST /stop
	approval chan string   // the choice POST /approval delivers

	mu         sync.Mutex
	registered bool
	status     string
	output     string
	ended      bool // the agent is done
}

func newQueueHermes(t *testing.T, script func(r *qhRun)) *queueHermes {
	h := &queueHermes{t: t, script: script, runs: map[string]*qhRun{}, done: make(chan struct{})}
	mux := http.NewServeMux()
	serveHermesCapabilities(mux, hermesKey, nil)
	mux.HandleFunc("POST /v1/runs", h.start)
	mux.HandleFunc("GET /v1/runs/{id}", h.get)
	mux.HandleFunc("GET /v1/runs/{id}/events", h.events)
	mux.HandleFunc("POST /v1/runs/{id}/stop", h.stopRun)
	mux.HandleFunc("POST /v1/runs/{id}/approval", h.approve)
	h.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		close(h.done)
		h.srv.Close()
	})
	return h
}

func qhError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": code}})
}

func (h *queueHermes) authed(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("Authorization") != "Bearer "+hermesKey {
		qhError(w, http.StatusUnauthorized, "invalid_api_key", "Invalid API key")
		return false
	}
	return true
}

// run returns the run of the request's id, or answers 404.
func (h *queueHermes) run(w http.ResponseWriter, r *http.Request) *qhRun {
	if !h.authed(w, r) {
		return nil
	}
	h.mu.Lock()
	run := h.runs[r.PathValue("id")]
	h.mu.Unlock()
	if run == nil {
		qhError(w, http.StatusNotFound, "run_not_found", "Run not found: "+r.PathValue("id"))
	}
	return run
}

func (h *queueHermes) start(w http.ResponseWriter, r *http.Request) {
	if !h.authed(w, r) {
		return
	}
	h.mu.Lock()
	h.n++
	run := &qhRun{h: h, id: fmt.Sprintf("run_%032x", h.n), q: make(chan qhItem, 4096), stop: make(chan struct{}),
		approval: make(chan string, 1), registered: true, status: "running"}
	h.runs[run.id] = run
	h.mu.Unlock()
	go func() {
		h.script(run)
		run.set(func() { run.ended = true })
	}()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	json.NewEncoder(w).Encode(map[string]any{"run_id": run.id, "status": "started"})
}

func (h *queueHermes) get(w http.ResponseWriter, r *http.Request) {
	run := h.run(w, r)
	if run == nil {
		return
	}
	run.mu.Lock()
	st := map[string]any{"object": "hermes.run", "run_id": run.id, "status": run.status, "created_at": 1.0, "updated_at": 2.0}
	if run.status == "completed" {
		st["output"] = run.output
		st["usage"] = map[string]any{"input_tokens": 9, "output_tokens": 5, "total_tokens": 14}
	}
	run.mu.Unlock()
	json.NewEncoder(w).Encode(st)
}

func (h *queueHermes) events(w http.ResponseWriter, r *http.Request) {
	run := h.run(w, r)
	if run == nil {
		return
	}
	for i := 0; !run.isRegistered(); i++ { // the wait for a run being registered
		if i == 20 {
			qhError(w, http.StatusNotFound, "run_not_found", "Run not found: "+run.id)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer run.set(func() { run.registered = false })
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	gone := r.Context().Done()
	left := false // the subscriber went away; noticed at the next write
	write := func(s string) bool {
		if left {
			return false
		}
		fmt.Fprint(w, s)
		w.(http.Flusher).Flush()
		return true
	}
	keepalive := time.NewTimer(30 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case <-h.done:
			return
		case <-gone:
			left, gone = true, nil
		case <-keepalive.C:
			if !write(": keepalive\n\n") {
				return
			}
			keepalive.Reset(30 * time.Second)
		case it := <-run.q:
			if it.end {
				write(": stream closed\n\n")
				return
			}
			b, _ := json.Marshal(it.ev)
			if !write("data: " + string(b) + "\n\n") {
				return // the event is lost
			}
			keepalive.Reset(30 * time.Second)
		}
	}
}

func (h *queueHermes) stopRun(w http.ResponseWriter, r *http.Request) {
	if !h.authed(w, r) {
		return
	}
	h.mu.Lock()
	h.stops = append(h.stops, r.PathValue("id"))
	run := h.runs[r.PathValue("id")]
	h.mu.Unlock()
	active := false
	if run != nil {
		run.mu.Lock()
		active = !run.ended && run.status != "cancelled"
		if active {
			run.status = "cancelled"
			close(run.stop)
		}
		run.mu.Unlock()
	}
	if !active {
		qhError(w, http.StatusNotFound, "run_not_found", "Run not found: "+r.PathValue("id"))
		return
	}
	run.send(map[string]any{"event": "run.cancelled"})
	run.q <- qhItem{end: true}
	json.NewEncoder(w).Encode(map[string]any{"run_id": run.id, "status": "stopping"})
}

func (h *queueHermes) approve(w http.ResponseWriter, r *http.Request) {
	run := h.run(w, r)
	if run == nil {
		return
	}
	var body struct {
		Choice string `json:"choice"`
	}
	json.NewDecoder(r.Body).Decode(&body)
	run.mu.Lock()
	waiting := run.status == "waiting_for_approval"
	if waiting {
		run.status = "running"
	}
	run.mu.Unlock()
	if !waiting {
		qhError(w, http.StatusConflict, "approval_not_pending", "Run has no pending approval: "+run.id)
		return
	}
	run.approval <- body.Choice
	if run.isRegistered() {
		run.send(map[string]any{"event": "approval.responded", "choice": body.Choice, "resolved": 1})
	}
	json.NewEncoder(w).Encode(map[string]any{"object": "hermes.run.approval_response", "run_id": run.id, "choice": body.Choice, "resolved": 1})
}

// forget drops every run, as a Hermes server that restarted has.
func (h *queueHermes) forget() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.runs = map[string]*qhRun{}
}

func (h *queueHermes) stopCalls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.stops...)
}

func (h *queueHermes) startCalls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// only returns the server's one run.
func (h *queueHermes) only(t *testing.T) *qhRun {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.runs) != 1 {
		t.Fatalf("hermes has %d runs, want 1", len(h.runs))
	}
	for _, r := range h.runs {
		return r
	}
	return nil
}

func (r *qhRun) set(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
}

func (r *qhRun) isRegistered() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.registered
}

func (r *qhRun) send(ev map[string]any) {
	ev["run_id"], ev["timestamp"] = r.id, 1778750000.5
	r.q <- qhItem{ev: ev}
}

func (r *qhRun) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// The agent's side.

// deltas streams text, a piece at a time, unless the run was stopped.
func (r *qhRun) deltas(pieces ...string) {
	for _, p := range pieces {
		if r.stopped() {
			return
		}
		r.send(map[string]any{"event": "message.delta", "delta": p})
		time.Sleep(5 * time.Millisecond)
	}
}

// await waits for ch to close (the test's go-ahead); false when the run was
// stopped first.
func (r *qhRun) await(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-r.stop:
		return false
	case <-r.h.done:
		return false
	}
}

// askApproval asks an approval and waits for its choice; "" when the run
// was stopped first.
func (r *qhRun) askApproval(command string) string {
	r.set(func() { r.status = "waiting_for_approval" })
	r.send(map[string]any{"event": "approval.request", "command": command, "description": "remove build output",
		"choices": []string{"once", "session", "always", "deny"}})
	select {
	case c := <-r.approval:
		return c
	case <-r.stop:
		return ""
	case <-r.h.done:
		return ""
	}
}

// complete ends the run completed with output.
func (r *qhRun) complete(output string) {
	if r.stopped() {
		return
	}
	r.set(func() { r.status, r.output = "completed", output })
	r.send(map[string]any{"event": "run.completed", "output": output,
		"usage": map[string]any{"input_tokens": 9, "output_tokens": 5, "total_tokens": 14}})
	r.q <- qhItem{end: true}
}
