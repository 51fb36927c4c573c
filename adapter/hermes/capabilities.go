package hermes

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/runhub/runhub/protocol"
)

// The Hermes API server says what it can do: GET /v1/capabilities
// (_handle_capabilities in gateway/platforms/api_server.py) answers
// {"object": "hermes.api_server.capabilities", "features": {…}, "endpoints":
// {…}}. Hermes Agent 0.18.x reports, among others, run_submission,
// run_status, run_events_sse, run_stop, run_approval_response,
// tool_progress_events, approval_events, session_resources, session_chat,
// session_chat_streaming and session_fork. Hermes servers older than the
// endpoint answer it 404: their /v1/runs API has runs, their events and
// POST /stop, and nothing else (no /approval).
//
// The driver maps the features to runhub capabilities (mapFeatures) when
// a profile is first used, and again once the answer is older than
// Config.CapabilitiesRefresh; a profile's capabilities (GET /v1/profiles,
// active_controls, every unsupported answer) follow.
//
// clarify is never among them: /v1/runs has no clarify endpoint, and the
// agent it creates has no clarify callback, so Hermes' clarify tool
// answers the model "Clarify tool is not available in this execution
// context" and no question ever reaches the run's event stream (the model
// asks in its answer instead, and the next run carries the reply).

// conservative is what a Hermes without /v1/capabilities can do: the
// runs API of every Hermes version (POST /v1/runs, its events, POST
// /stop) and runhub's own queue. No approval (older servers have no
// /approval endpoint), no steer.
var conservative = []string{protocol.CapCancel, protocol.CapQueue, protocol.CapReasoning, protocol.CapUsage, protocol.CapTools}

// features is the "features" object of GET /v1/capabilities. Its values
// are booleans, or strings for some (session_continuity_header,
// managed_run_history_authority).
type features map[string]any

func (f features) on(name string) bool {
	b, _ := f[name].(bool)
	return b
}

func (f features) str(name string) string {
	s, _ := f[name].(string)
	return s
}

// runtimeState is what the driver last learnt of its server's
// capabilities.
type runtimeState struct {
	caps []string
	// ownsHistory: the server loads a session's history from its own
	// session store when a run names the session (managed_run_sessions
	// with managed_run_history_authority hermes_session_db), so no
	// conversation_history is sent for the turns it ran itself.
	ownsHistory bool
}

// mapFeatures maps a server's features to runhub capabilities:
//
//	run_stop                                   cancel (POST /stop)
//	run_approval_response and approval_events  approval (approval.request events,
//	                                           POST /approval)
//	run_steer                                  steer (POST /steer)
//	tool_progress_events                       tools
//	run_events_sse                             reasoning (reasoning.available)
//	run_submission                             queue (runhub's queue starts runs),
//	                                           usage (run.completed carries it)
//
// A server without run_submission can run nothing: no capability.
func mapFeatures(f features) runtimeState {
	st := runtimeState{caps: []string{}}
	if !f.on("run_submission") {
		return st
	}
	add := func(c string) { st.caps = append(st.caps, c) }
	if f.on("run_stop") {
		add(protocol.CapCancel)
	}
	if f.on("run_approval_response") && f.on("approval_events") {
		add(protocol.CapApproval)
	}
	if f.on("run_steer") {
		add(protocol.CapSteer)
	}
	add(protocol.CapQueue)
	if f.on("run_events_sse") {
		add(protocol.CapReasoning)
	}
	add(protocol.CapUsage)
	if f.on("tool_progress_events") {
		add(protocol.CapTools)
	}
	st.caps = protocol.SortCapabilities(st.caps)
	st.ownsHistory = f.on("managed_run_sessions") && f.str("managed_run_history_authority") == "hermes_session_db"
	return st
}

// capsCache holds the last answer and refreshes it: the first use asks
// and waits (at most Config.CapabilitiesTimeout); a later use past
// Config.CapabilitiesRefresh asks again in the background and answers
// with what it has meanwhile.
type capsCache struct {
	mu       sync.Mutex
	st       runtimeState
	known    bool
	at       time.Time     // when st was learnt (zero: ask again at the next use)
	inflight chan struct{} // closed when the probe under way ends
	missing  bool          // the last answer was 404 (logged once)
}

// RuntimeCapabilities implements driver.CapabilityReporter.
func (d *Driver) RuntimeCapabilities() ([]string, bool) {
	st, known := d.runtime(context.Background())
	return st.caps, known
}

// runtime returns what the driver knows of its server, asking it when it
// never did (waiting up to CapabilitiesTimeout, or ctx) or when the
// answer is stale (in the background).
func (d *Driver) runtime(ctx context.Context) (runtimeState, bool) {
	c := &d.capsCache
	c.mu.Lock()
	if c.known && time.Since(c.at) < d.cfg.CapabilitiesRefresh {
		defer c.mu.Unlock()
		return c.st, true
	}
	wait := c.inflight
	if wait == nil {
		wait = make(chan struct{})
		c.inflight = wait
		go d.probe(wait)
	}
	if c.known { // stale: answer now, the probe refreshes it
		defer c.mu.Unlock()
		return c.st, true
	}
	c.mu.Unlock()
	t := time.NewTimer(d.cfg.CapabilitiesTimeout)
	defer t.Stop()
	select {
	case <-wait:
	case <-t.C:
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st, c.known
}

// probe asks GET /v1/capabilities once and records the answer, then
// closes done.
func (d *Driver) probe(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.RequestTimeout)
	defer cancel()
	var body struct {
		Features features `json:"features"`
	}
	err := d.c.call(ctx, http.MethodGet, "/v1/capabilities", nil, &body, nil)
	log := d.cfg.Logger.With("driver", "hermes", "base_url", d.cfg.BaseURL)
	c := &d.capsCache
	c.mu.Lock()
	defer func() {
		c.inflight = nil
		c.mu.Unlock()
		close(done)
	}()
	switch status := statusOf(err); {
	case err == nil:
		st := mapFeatures(body.Features)
		if !c.known || !equal(c.st, st) {
			raw, _ := json.Marshal(body.Features)
			log.Info("Hermes reported its capabilities", "capabilities", st.caps, "owns_history", st.ownsHistory,
				"features", protocol.Truncate(string(raw), 2000))
		}
		c.st, c.known, c.at, c.missing = st, true, time.Now(), false
	case status == http.StatusNotFound:
		if !c.missing {
			log.Warn("Hermes has no GET /v1/capabilities (a version older than the endpoint); assuming the conservative set",
				"capabilities", conservative)
		}
		c.st, c.known, c.at, c.missing = runtimeState{caps: conservative}, true, time.Now(), true
	case c.known:
		// Unreachable or refusing: keep the last answer, ask again at the
		// next use.
		log.Warn("could not read Hermes' capabilities; keeping the last answer", "err", err)
		c.at = d.retryAt()
	default:
		log.Warn("could not read Hermes' capabilities; assuming the conservative set until it answers",
			"err", err, "capabilities", conservative)
		c.st, c.known, c.at = runtimeState{caps: conservative}, true, d.retryAt()
	}
}

// retryAt is the learnt-at time of an answer to be asked again after
// capabilitiesRetry rather than a whole CapabilitiesRefresh.
func (d *Driver) retryAt() time.Time {
	return time.Now().Add(min(capabilitiesRetry, d.cfg.CapabilitiesRefresh) - d.cfg.CapabilitiesRefresh)
}

// capabilitiesRetry is how soon a failed read of the capabilities is
// tried again.
const capabilitiesRetry = 5 * time.Second

func equal(a, b runtimeState) bool {
	if a.ownsHistory != b.ownsHistory || len(a.caps) != len(b.caps) {
		return false
	}
	for i := range a.caps {
		if a.caps[i] != b.caps[i] {
			return false
		}
	}
	return true
}
