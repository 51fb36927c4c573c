package hermes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeHermes is a Hermes Agent API server as Hermes Agent 0.18.x behaves
// (gateway/platforms/api_server.py, APIServerAdapter), quirks included:
//
//   - POST /v1/runs (_handle_runs) ignores Idempotency-Key: every start
//     that reaches it launches a run (a model call), answered
//     202 {run_id, status: "started"}.
//   - GET /v1/runs/{id}/events (_handle_run_events) streams the run's one
//     queue (_run_streams) as `data: {event, run_id, timestamp, …}` frames
//     with `: keepalive` comments, and drops the queue when the subscriber
//     ends: a later subscription answers 404 run_not_found. A subscriber
//     whose connection is cut mid-run keeps the queue until its handler
//     notices (sseWriter.orphaned): a resubscriber shares it, then gets
//     nothing but keepalives once the old handler dropped it.
//   - GET /v1/runs/{id} (_handle_get_run, _set_run_status) answers the
//     pollable status: queued, running, waiting_for_approval, stopping,
//     completed {output, usage}, failed {error}, cancelled.
//   - POST /v1/runs/{id}/stop (_handle_stop_run) answers {run_id, status:
//     "stopping"} for an active run, which then ends cancelled, and 404
//     run_not_found for a finished or unknown one.
//   - GET /v1/capabilities (_handle_capabilities) answers
//     {object: "hermes.api_server.capabilities", platform, model, auth,
//     runtime, features, endpoints}; features are 0.18.x's (features018)
//     unless the test sets its own, and a fake with noCapabilities is a
//     Hermes older than the endpoint: 404, as aiohttp answers a route it
//     does not have. A control route is served only while the features
//     say the server has it: POST /approval with run_approval_response,
//     POST /stop with run_stop, POST /steer with run_steer (servers after
//     0.18.x); else it is aiohttp's 404 too, counted (absentCalls). The
//     runs API has no clarify route (POST /clarify is aiohttp's 404,
//     counted), and its runs never stream clarify.request (a test's script
//     may, for the driver's handling of one: TestClarifyNotRelayed).
//   - An approval.request is the approval data of tools/approval.py
//     (command, description, pattern_key, pattern_keys) with the choices
//     the API server adds (once, session, always, deny): never a risk.
//     POST /approval takes a choice of those four (approve, approved and
//     allow mean once), else 400 invalid_approval_choice.
//
// What a run streams is the test's script.
type fakeHermes struct {
	t   *testing.T
	key string
	srv *httptest.Server

	// script streams the events of the n-th run (1-based) on its sub-th
	// subscription (1-based). Returning normally ends the stream with
	// ": stream closed"; panic(http.ErrAbortHandler) drops the connection.
	script func(fr *fakeRun, n, sub int, w *sseWriter)
	// startFail, when set, answers the n-th start attempt (1-based) with a
	// status and body instead of admitting it; admit true admits the run
	// anyway (a gateway in front of Hermes lost the answer).
	startFail func(attempt int) (status int, body string, admit bool)
	// startLost, when set and true for the n-th start attempt, admits the
	// run and then drops the connection before answering.
	startLost func(attempt int) bool

	// idempotent makes the fake a server that honours Idempotency-Key
	// (Hermes Agent 0.18.x does not): a start with a key it has seen
	// replays that run ({replayed: true}) instead of launching another.
	idempotent bool

	// controlStatus, when set, answers every control POST with this status
	// (the body is still recorded).
	controlStatus int

	// features answer GET /v1/capabilities (nil: features018);
	// noCapabilities answers it 404 (a Hermes older than the endpoint).
	// setFeatures changes them while the server runs.
	features       map[string]any
	noCapabilities bool
	capsCalls      int
	absent         int // requests to a control route the features say the server lacks

	mu       sync.Mutex
	attempts int
	starts   []startCall
	runs     map[string]*fakeRun
	byKey    map[string]string // idempotent: the run of each key
	authFail int               // requests refused for a wrong key
	stops    []string          // the run id of every POST /stop
}

type startCall struct {
	Body    map[string]any
	Key     string
	Auth    string
	Refused bool
}

type fakeRun struct {
	id string
	n  int

	approvals chan map[string]any
	steers    chan map[string]any
	stopped   chan struct{}

	mu         sync.Mutex
	status     string
	output     string
	usage      map[string]any
	errText    string
	deleted    bool // GET answers 404 run_not_found
	streamGone bool // events answer 404 (the queue was dropped)
	subs       int
	polls      int         // GET /v1/runs/{id} answered
	onPoll     func(n int) // when set, called (fr.mu held) before the n-th poll is answered
	stopOnce   sync.Once
	stops      int
}

func (fr *fakeRun) set(f func(fr *fakeRun)) {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	f(fr)
}

func (fr *fakeRun) stopCount() int {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return fr.stops
}

// wait returns the next body posted on ch, failing the script after 10 s.
func (fr *fakeRun) wait(t *testing.T, ch chan map[string]any, what string) map[string]any {
	select {
	case b := <-ch:
		return b
	case <-time.After(10 * time.Second):
		t.Errorf("fake hermes: no %s POST", what)
		panic(http.ErrAbortHandler)
	}
}

func newFakeHermes(t *testing.T, key string) *fakeHermes {
	f := &fakeHermes{t: t, key: key, runs: map[string]*fakeRun{}, byKey: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/runs", f.handleStart)
	mux.HandleFunc("GET /v1/runs/{id}", f.handleGet)
	mux.HandleFunc("GET /v1/runs/{id}/events", f.handleEvents)
	mux.HandleFunc("POST /v1/runs/{id}/approval", f.routed("run_approval_response", f.control(func(fr *fakeRun) chan map[string]any { return fr.approvals }, approvalChoice)))
	mux.HandleFunc("POST /v1/runs/{id}/clarify", f.absentRoute)
	mux.HandleFunc("POST /v1/runs/{id}/steer", f.routed("run_steer", f.control(func(fr *fakeRun) chan map[string]any { return fr.steers }, nil)))
	mux.HandleFunc("GET /v1/capabilities", f.handleCapabilities)
	mux.HandleFunc("POST /v1/runs/{id}/stop", f.routed("run_stop", f.handleStop))
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// features018 are the features Hermes Agent 0.18.x reports on GET
// /v1/capabilities.
func features018() map[string]any {
	return map[string]any{
		"chat_completions": true, "chat_completions_streaming": true, "responses_api": true, "responses_streaming": true,
		"run_submission": true, "run_status": true, "run_events_sse": true, "run_stop": true,
		"run_approval_response": true, "tool_progress_events": true, "approval_events": true,
		"session_resources": true, "session_chat": true, "session_chat_streaming": true, "session_fork": true,
		"admin_config_rw": false, "jobs_admin": false, "memory_write_api": false, "skills_api": true,
		"audio_api": false, "realtime_voice": false,
		"session_continuity_header": "X-Hermes-Session-Id", "session_key_header": "X-Hermes-Session-Key", "cors": false,
	}
}

// setFeatures changes what GET /v1/capabilities reports: f applies to a
// copy of the current features.
func (f *fakeHermes) setFeatures(change func(map[string]any)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	next := features018()
	if f.features != nil {
		next = map[string]any{}
		for k, v := range f.features {
			next[k] = v
		}
	}
	change(next)
	f.features = next
}

func (f *fakeHermes) feature(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	feats := f.features
	if feats == nil {
		feats = features018()
	}
	on, _ := feats[name].(bool)
	return on
}

// routed serves h while the features say the server has the route
// (feature), else answers as a server without it does, counted.
func (f *fakeHermes) routed(feature string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !f.feature(feature) {
			f.mu.Lock()
			f.absent++
			f.mu.Unlock()
			aiohttpNotFound(w)
			return
		}
		h(w, r)
	}
}

// absentRoute answers as a route the server does not have, counted.
func (f *fakeHermes) absentRoute(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.absent++
	f.mu.Unlock()
	aiohttpNotFound(w)
}

// approvalChoice checks an approval answer as _handle_run_approval does:
// the choice, lowercased (approve, approved and allow mean once), must be
// once, session, always or deny.
func approvalChoice(body map[string]any) (code, msg string) {
	c, _ := body["choice"].(string)
	c = strings.ToLower(strings.TrimSpace(c))
	switch c {
	case "approve", "approved", "allow":
		c = "once"
	}
	if !slices.Contains([]string{"once", "session", "always", "deny"}, c) {
		return "invalid_approval_choice", "Invalid approval choice; expected one of: once, session, always, deny"
	}
	return "", ""
}

// absentCalls is how many requests went to a route the server lacked.
func (f *fakeHermes) absentCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.absent
}

// aiohttpNotFound is aiohttp's answer to a route the server does not
// have.
func aiohttpNotFound(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusNotFound)
	w.Write([]byte("404: Not Found"))
}

func (f *fakeHermes) handleCapabilities(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.capsCalls++
	missing, feats := f.noCapabilities, f.features
	f.mu.Unlock()
	if missing {
		aiohttpNotFound(w)
		return
	}
	if !f.authorized(w, r) {
		return
	}
	if feats == nil {
		feats = features018()
	}
	ep := func(method, path string) map[string]string { return map[string]string{"method": method, "path": path} }
	endpoints := map[string]any{"health": ep("GET", "/health"), "models": ep("GET", "/v1/models"),
		"runs": ep("POST", "/v1/runs"), "run_status": ep("GET", "/v1/runs/{run_id}"),
		"run_events": ep("GET", "/v1/runs/{run_id}/events"), "run_approval": ep("POST", "/v1/runs/{run_id}/approval"),
		"run_stop": ep("POST", "/v1/runs/{run_id}/stop"), "sessions": ep("GET", "/api/sessions"),
		"session_chat": ep("POST", "/api/sessions/{session_id}/chat")}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"object": "hermes.api_server.capabilities", "platform": "hermes-agent",
		"model": "hermes-agent", "auth": map[string]any{"type": "bearer", "required": f.key != ""},
		"runtime":  map[string]any{"mode": "server_agent", "tool_execution": "server", "split_runtime": false},
		"features": feats, "endpoints": endpoints})
}

// capabilitiesCalls is how often GET /v1/capabilities was asked.
func (f *fakeHermes) capabilitiesCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.capsCalls
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": code}})
}

func (f *fakeHermes) authorized(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("Authorization") == "Bearer "+f.key {
		return true
	}
	f.mu.Lock()
	f.authFail++
	f.mu.Unlock()
	writeError(w, http.StatusUnauthorized, "invalid_api_key", "Invalid API key")
	return false
}

func (f *fakeHermes) run(w http.ResponseWriter, r *http.Request) *fakeRun {
	if !f.authorized(w, r) {
		return nil
	}
	f.mu.Lock()
	fr := f.runs[r.PathValue("id")]
	f.mu.Unlock()
	if fr == nil {
		writeError(w, http.StatusNotFound, "run_not_found", "Run not found: "+r.PathValue("id"))
		return nil
	}
	fr.mu.Lock()
	deleted := fr.deleted
	fr.mu.Unlock()
	if deleted {
		writeError(w, http.StatusNotFound, "run_not_found", "Run not found: "+fr.id)
		return nil
	}
	return fr
}

func (f *fakeHermes) handleStart(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body)
	call := startCall{Body: body, Key: r.Header.Get("Idempotency-Key"), Auth: r.Header.Get("Authorization")}
	if !f.authorized(w, r) {
		call.Refused = true
		f.mu.Lock()
		f.starts = append(f.starts, call)
		f.mu.Unlock()
		return
	}
	if in, _ := body["input"].(string); in == "" {
		writeError(w, http.StatusBadRequest, "", "Missing 'input' field")
		return
	}
	f.mu.Lock()
	f.attempts++
	attempt := f.attempts
	f.starts = append(f.starts, call)
	fail := f.startFail
	f.mu.Unlock()
	status, errBody, admit := 0, "", true
	if fail != nil {
		status, errBody, admit = fail(attempt)
	}
	var id string
	replayed := false
	if admit { // Hermes 0.18.x: Idempotency-Key plays no part, every admission is a new run
		f.mu.Lock()
		if prev, ok := f.byKey[call.Key]; ok && f.idempotent && call.Key != "" {
			id, replayed = prev, true
		} else {
			id = f.newRun().id
			if f.idempotent && call.Key != "" {
				f.byKey[call.Key] = id
			}
		}
		f.mu.Unlock()
	}
	if f.startLost != nil && f.startLost(attempt) {
		panic(http.ErrAbortHandler) // admitted, but the answer never leaves
	}
	if status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write([]byte(errBody))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	ans := map[string]any{"run_id": id, "status": "started"}
	if f.idempotent {
		ans["replayed"] = replayed
	}
	json.NewEncoder(w).Encode(ans)
}

// newRun registers a run Hermes has going; f.mu is held.
func (f *fakeHermes) newRun() *fakeRun {
	id := fmt.Sprintf("run_%032x", len(f.runs)+1)
	fr := &fakeRun{id: id, n: len(f.runs) + 1, status: "running",
		approvals: make(chan map[string]any, 8),
		steers:    make(chan map[string]any, 8), stopped: make(chan struct{})}
	f.runs[id] = fr
	return fr
}

// admit starts a run in Hermes without the driver (one a previous hub
// process started).
func (f *fakeHermes) admit() *fakeRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.newRun()
}

// modelCalls is how many runs Hermes launched (each one calls the model).
func (f *fakeHermes) modelCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.runs)
}

// stopCalls returns the run id of every POST /stop, in order.
func (f *fakeHermes) stopCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.stops...)
}

func (f *fakeHermes) handleGet(w http.ResponseWriter, r *http.Request) {
	fr := f.run(w, r)
	if fr == nil {
		return
	}
	fr.mu.Lock()
	fr.polls++
	if fr.onPoll != nil {
		fr.onPoll(fr.polls)
	}
	st := map[string]any{"object": "hermes.run", "run_id": fr.id, "status": fr.status,
		"created_at": 1.0, "updated_at": 2.0, "session_id": "s", "model": "hermes-agent", "last_event": "message.delta"}
	if fr.output != "" {
		st["output"] = fr.output
	}
	if fr.usage != nil {
		st["usage"] = fr.usage
	}
	if fr.errText != "" {
		st["error"] = fr.errText
	}
	fr.mu.Unlock()
	json.NewEncoder(w).Encode(st)
}

func (f *fakeHermes) handleEvents(w http.ResponseWriter, r *http.Request) {
	fr := f.run(w, r)
	if fr == nil {
		return
	}
	fr.mu.Lock()
	gone := fr.streamGone
	fr.subs++
	sub := fr.subs
	fr.mu.Unlock()
	if gone {
		writeError(w, http.StatusNotFound, "run_not_found", "Run not found: "+fr.id)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	sw := &sseWriter{tt: f.t, w: w, f: w.(http.Flusher), fr: fr, run: fr.id, ctx: r.Context()}
	sw.f.Flush()
	f.script(fr, fr.n, sub, sw)
	// Hermes drops the queue once the run's stream is closed.
	fr.set(func(fr *fakeRun) { fr.streamGone = true })
	sw.raw(": stream closed\n\n")
}

// control records a control's body on ch and answers it; check, when set,
// refuses a body as Hermes does (400 with its code) before anything is
// recorded.
func (f *fakeHermes) control(ch func(*fakeRun) chan map[string]any, check func(map[string]any) (string, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		fr := f.run(w, r)
		if fr == nil {
			return
		}
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		if check != nil {
			if code, msg := check(body); code != "" {
				writeError(w, http.StatusBadRequest, code, msg)
				return
			}
		}
		select {
		case ch(fr) <- body:
		default:
		}
		if f.controlStatus != 0 {
			writeError(w, f.controlStatus, "approval_not_pending", "Run has no pending approval: "+fr.id)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"run_id": fr.id, "accepted": true})
	}
}

// handleStop stops an active run: the agent is interrupted, its task
// cancelled and awaited, so the status says cancelled once the answer
// (status "stopping") is out. A run that already ended has no agent or
// task any more: 404 run_not_found, as for an unknown id.
func (f *fakeHermes) handleStop(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(w, r) {
		return
	}
	f.mu.Lock()
	f.stops = append(f.stops, r.PathValue("id"))
	fr := f.runs[r.PathValue("id")]
	f.mu.Unlock()
	active := false
	if fr != nil {
		fr.mu.Lock()
		active = !fr.deleted && !ended(fr.status)
		if active {
			fr.stops++
			fr.status = "cancelled"
		}
		fr.mu.Unlock()
	}
	if !active {
		writeError(w, http.StatusNotFound, "run_not_found", "Run not found: "+r.PathValue("id"))
		return
	}
	fr.stopOnce.Do(func() { close(fr.stopped) })
	json.NewEncoder(w).Encode(map[string]any{"run_id": fr.id, "status": "stopping"})
}

func ended(status string) bool {
	return status == "completed" || status == "failed" || status == "cancelled"
}

// finish ends the run in Hermes without any subscriber seeing it (its
// events went to a dropped queue): the pollable status says completed.
func (fr *fakeRun) finish(output string) {
	fr.set(func(fr *fakeRun) {
		fr.status, fr.output = "completed", output
		fr.usage = map[string]any{"input_tokens": 11, "output_tokens": 7, "total_tokens": 18}
	})
}

// onlyRun returns the fake's one run.
func (f *fakeHermes) onlyRun(t *testing.T) *fakeRun {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.runs) != 1 {
		t.Fatalf("fake hermes has %d runs, want 1", len(f.runs))
	}
	for _, fr := range f.runs {
		return fr
	}
	return nil
}

func (f *fakeHermes) startCalls() []startCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]startCall(nil), f.starts...)
}

// sseWriter writes the frames of one subscription.
type sseWriter struct {
	tt  *testing.T
	w   http.ResponseWriter
	f   http.Flusher
	fr  *fakeRun
	run string
	ctx context.Context
}

// event writes one event frame: data is {event, run_id, timestamp, …fields}.
// A terminal event settles the pollable status first, as Hermes does.
func (s *sseWriter) event(name string, fields map[string]any) {
	m := map[string]any{"event": name, "run_id": s.run, "timestamp": 1778750000.5}
	for k, v := range fields {
		m[k] = v
	}
	switch name {
	case "run.completed":
		s.fr.set(func(fr *fakeRun) {
			fr.status = "completed"
			fr.output, _ = fields["output"].(string)
			fr.usage, _ = fields["usage"].(map[string]any)
		})
	case "run.failed":
		s.fr.set(func(fr *fakeRun) { fr.status, fr.errText = "failed", fmt.Sprint(fields["error"]) })
	case "run.cancelled":
		s.fr.set(func(fr *fakeRun) { fr.status = "cancelled" })
	}
	b, _ := json.Marshal(m)
	s.raw("data: " + string(b) + "\n\n")
}

func (s *sseWriter) raw(text string) {
	if _, err := s.w.Write([]byte(text)); err != nil {
		panic(http.ErrAbortHandler)
	}
	s.f.Flush()
}

func (s *sseWriter) t() *testing.T { return s.tt }

func (s *sseWriter) keepalive() { s.raw(": keepalive\n\n") }

// drop breaks the connection mid-stream.
func (s *sseWriter) drop() { panic(http.ErrAbortHandler) }

// orphaned is a resubscription after a cut connection, as Hermes 0.18.x
// serves it: the new handler shares the run's queue with the handler of
// the cut connection, which drops the queue when its next write fails, so
// whatever the run sends from then on is lost (then runs at that moment:
// Hermes going on with the run). The new stream carries only keepalives
// (every every) until the client leaves.
func (s *sseWriter) orphaned(every time.Duration, then func()) {
	s.keepalive()
	then()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			s.drop()
		case <-t.C:
			s.keepalive()
		}
	}
}

// hold keeps the stream open (sending keepalives every every, when not
// zero) until the client leaves or the run is stopped.
func (s *sseWriter) hold(fr *fakeRun, every time.Duration) {
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-s.ctx.Done():
			s.drop() // the subscriber left; the queue stays (resubscribable)
		case <-fr.stopped:
			s.event("run.cancelled", nil)
			return
		case <-tick:
			s.keepalive()
		}
	}
}

func deltas(s *sseWriter, words ...string) {
	for _, w := range words {
		s.event("message.delta", map[string]any{"delta": w})
	}
}

func completed(s *sseWriter, output string) {
	s.event("run.completed", map[string]any{"output": output,
		"usage": map[string]any{"input_tokens": 11, "output_tokens": 7, "total_tokens": 18}})
}

// onlyRunN returns the fake's n-th run (1-based).
func (f *fakeHermes) onlyRunN(t *testing.T, n int) *fakeRun {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fr := range f.runs {
		if fr.n == n {
			return fr
		}
	}
	t.Fatalf("fake hermes has no run %d", n)
	return nil
}
