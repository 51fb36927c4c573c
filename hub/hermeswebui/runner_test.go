package hermeswebui_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/hermeswebui"
	"github.com/runhub/runhub/hub/httpapi"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/internal/webuiclient"
)

const webuiBase = "/compat/hermes-webui"

// webuiHub is a test hub that also serves hermes-webui's runner API.
type webuiHub struct {
	*hubtest.Hub
	runner string // HERMES_WEBUI_RUNNER_BASE_URL
}

func newWebUIHub(t testing.TB, cfg hub.Config, o hermeswebui.RunnerOptions) *webuiHub {
	t.Helper()
	o.Base = webuiBase
	th := hubtest.Serve(t, cfg, hubtest.Options{Bolt: true, Edges: []hub.Edge{httpapi.New(nil), hermeswebui.Runner(o)}})
	return &webuiHub{Hub: th, runner: th.URL + webuiBase}
}

// simMeta is a start's metadata: a simulator script.
func simMeta(script map[string]any) map[string]any { return map[string]any{"sim": script} }

// relayed collects what a relay wrote to the browser.
type relayed struct {
	mu     sync.Mutex
	frames []webuiclient.Frame
	notify chan struct{}
}

func newRelayed() *relayed { return &relayed{notify: make(chan struct{}, 1)} }

func (r *relayed) write(f webuiclient.Frame) {
	r.mu.Lock()
	r.frames = append(r.frames, f)
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *relayed) snapshot() []webuiclient.Frame {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]webuiclient.Frame(nil), r.frames...)
}

// waitFor waits until a frame satisfies cond and returns it.
func (r *relayed) waitFor(t testing.TB, what string, cond func(webuiclient.Frame) bool) webuiclient.Frame {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		for _, f := range r.snapshot() {
			if cond(f) {
				return f
			}
		}
		select {
		case <-r.notify:
		case <-deadline:
			t.Fatalf("no %s among %d frames: %v", what, len(r.snapshot()), names(r.snapshot()))
		}
	}
}

func named(name string) func(webuiclient.Frame) bool {
	return func(f webuiclient.Frame) bool { return f.Event == name }
}

func names(fs []webuiclient.Frame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Event
	}
	return out
}

// relay runs the client's relay in the background; wait returns its error.
func relay(ctx context.Context, c *webuiclient.Client, runID string, cursor *string, r *relayed) (wait func() error) {
	done := make(chan error, 1)
	go func() { done <- c.Relay(ctx, runID, cursor, r.write) }()
	return func() error {
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return errors.New("the relay did not end")
		}
	}
}

// checkFrames asserts the frames are a run's relay: ids run:seq strictly
// increasing (no repeat, nothing before from), one closing frame, last.
func checkFrames(t testing.TB, runID string, fs []webuiclient.Frame, from uint64) (text string) {
	t.Helper()
	last := from
	for i, f := range fs {
		if f.ID != "" {
			rid, seqText, ok := strings.Cut(f.ID, ":")
			seq, err := strconv.ParseUint(seqText, 10, 64)
			if !ok || err != nil || rid != runID {
				t.Fatalf("frame %d (%s): id %q is not %s:seq", i, f.Event, f.ID, runID)
			}
			if seq <= last {
				t.Fatalf("frame %d (%s): seq %d after %d (repeat or disorder)", i, f.Event, seq, last)
			}
			last = seq
		}
		switch f.Event {
		case "stream_end", "cancel", "apperror", "error":
			if i != len(fs)-1 {
				t.Fatalf("frame %d (%s) closes the relay but %d frames follow", i, f.Event, len(fs)-1-i)
			}
		case "token":
			text += f.Data.(map[string]any)["text"].(string)
		}
	}
	return text
}

func ptr(s string) *string { return &s }

// lockedBuffer is a log destination safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A text run with reasoning and a tool: started through the runner API,
// relayed like /api/chat/stream relays it, in WebUI's legacy names and
// payloads, ending with done then stream_end, with no 5-s stall.
func TestWebUIText(t *testing.T) {
	th := newWebUIHub(t, hub.Config{}, hermeswebui.RunnerOptions{})
	c := webuiclient.New(th.runner, "")
	ctx := hubtest.Ctx(t, 30*time.Second)
	st, err := c.StartRun(ctx, webuiclient.StartRunRequest{SessionID: "a1b2c3d4e5f6", Message: "Why does test_io fail?",
		Workspace: ptr("/home/ann/proj"), Profile: ptr("default"), Model: ptr("sim-1"), Provider: ptr("openai"),
		Attachments: []map[string]any{{"name": "log.txt", "path": "/tmp/log.txt", "mime": "text/plain", "size": 12}},
		Metadata:    simMeta(map[string]any{"tokens": 6, "token_ms": 5, "tools": 1, "reasoning": 2})})
	if err != nil {
		t.Fatal(err)
	}
	if st.RunID == "" || st.StreamID != st.RunID || st.SessionID != "a1b2c3d4e5f6" || st.Status != "started" {
		t.Fatalf("start: %+v", st)
	}
	r := newRelayed()
	if err := relay(ctx, c, st.RunID, nil, r)(); err != nil {
		t.Fatal(err)
	}
	fs := r.snapshot()
	if text := checkFrames(t, st.RunID, fs, 0); text != sim.Text(6) {
		t.Fatalf("text %q, want %q", text, sim.Text(6))
	}
	want := []string{"title", "reasoning", "reasoning", "tool", "tool_complete", "token", "token", "token", "token", "token", "token", "done", "stream_end"}
	if got := names(fs); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("frames %v, want %v", got, want)
	}
	tool := fs[3].Data.(map[string]any)
	done := fs[4].Data.(map[string]any)
	if tool["event_type"] != "tool.started" || tool["name"] != "sim.echo" || tool["args"].(map[string]any)["step"] != 1.0 ||
		done["event_type"] != "tool.completed" || done["name"] != "sim.echo" || done["tid"] != tool["tid"] || done["is_error"] != false {
		t.Fatalf("tool frames: %v / %v", tool, done)
	}
	if fs[0].Data.(map[string]any)["title"] == "" || fs[1].Data.(map[string]any)["text"] != "r0 " {
		t.Fatalf("title/reasoning: %v %v", fs[0].Data, fs[1].Data)
	}
	d := fs[len(fs)-2].Data.(map[string]any)
	sess := d["session"].(map[string]any)
	msgs := sess["messages"].([]any)
	if sess["session_id"] != "a1b2c3d4e5f6" || len(msgs) != 2 || msgs[0].(map[string]any)["content"] != "Why does test_io fail?" ||
		msgs[1].(map[string]any)["content"] != sim.Text(6) || d["usage"].(map[string]any)["output_tokens"] != 6.0 {
		t.Fatalf("done: %v", d)
	}
	if fs[len(fs)-1].ID != "" {
		t.Fatalf("stream_end has an id: %q", fs[len(fs)-1].ID)
	}
	if n := c.Sleeps(); n != 0 {
		t.Fatalf("the relay slept %d times after empty polls", n)
	}
	run, err := c.GetRun(ctx, st.RunID)
	if err != nil || run.Status != "completed" || run.TerminalState != "completed" || run.SessionID != "a1b2c3d4e5f6" {
		t.Fatalf("get_run: %+v %v", run, err)
	}
	// The run is a runhub run of the session: the rest of the API sees it.
	var ss struct {
		SessionID string `json:"session_id"`
		Status    string `json:"status"`
	}
	hubtest.Do(t, "GET", th.URL+"/v1/sessions/a1b2c3d4e5f6", "", nil, &ss)
	if ss.SessionID != "a1b2c3d4e5f6" || ss.Status != "completed" {
		t.Fatalf("session: %+v", ss)
	}
}

// An approval and a clarify: the relay shows each prompt, get_run names it
// pending, and the client's answers resume the run.
func TestWebUIApprovalClarify(t *testing.T) {
	th := newWebUIHub(t, hub.Config{}, hermeswebui.RunnerOptions{})
	c := webuiclient.New(th.runner, "")
	ctx := hubtest.Ctx(t, 30*time.Second)
	st, err := c.StartRun(ctx, webuiclient.StartRunRequest{SessionID: "s-approve", Message: "go",
		Metadata: simMeta(map[string]any{"tokens": 3, "token_ms": 1, "approval": true, "clarify": true})})
	if err != nil {
		t.Fatal(err)
	}
	r := newRelayed()
	wait := relay(ctx, c, st.RunID, nil, r)
	ap := r.waitFor(t, "approval", named("approval")).Data.(map[string]any)
	aid, _ := ap["approval_id"].(string)
	if aid == "" || ap["command"] == "" || ap["run_id"] != st.RunID {
		t.Fatalf("approval: %v", ap)
	}
	run, err := c.GetRun(ctx, st.RunID)
	if err != nil || run.PendingApprovalID != aid || run.Status != "awaiting_approval" || run.TerminalState != nil {
		t.Fatalf("get_run while waiting: %+v %v", run, err)
	}
	if res, err := c.RespondApproval(ctx, st.RunID, "nope", "once"); err != nil || res.Accepted {
		t.Fatalf("a wrong approval id: %+v %v", res, err)
	}
	if res, err := c.RespondApproval(ctx, st.RunID, aid, "once"); err != nil || !res.Accepted || res.Status != "accepted" {
		t.Fatalf("approval: %+v %v", res, err)
	}
	cl := r.waitFor(t, "clarify", named("clarify")).Data.(map[string]any)
	cid, _ := cl["clarify_id"].(string)
	if cid == "" || cl["question"] == "" || cl["kind"] != "clarify" || len(cl["choices_offered"].([]any)) != 2 {
		t.Fatalf("clarify: %v", cl)
	}
	if run, _ := c.GetRun(ctx, st.RunID); run.PendingClarifyID != cid {
		t.Fatalf("get_run while asking: %+v", run)
	}
	if res, err := c.RespondClarify(ctx, st.RunID, cid, "short"); err != nil || !res.Accepted {
		t.Fatalf("clarify: %+v %v", res, err)
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	fs := r.snapshot()
	if text := checkFrames(t, st.RunID, fs, 0); text != sim.Text(3) || fs[len(fs)-1].Event != "stream_end" {
		t.Fatalf("text %q, frames %v", text, names(fs))
	}
	if res, err := c.RespondApproval(ctx, st.RunID, aid, "once"); err != nil || res.Accepted || res.Status != "not-active" {
		t.Fatalf("approval after the end: %+v %v", res, err)
	}
}

// Cancel while the run streams: the relay ends on cancel (type
// cancelled); a second cancel is not active.
func TestWebUICancel(t *testing.T) {
	th := newWebUIHub(t, hub.Config{}, hermeswebui.RunnerOptions{})
	c := webuiclient.New(th.runner, "")
	ctx := hubtest.Ctx(t, 30*time.Second)
	st, err := c.StartRun(ctx, webuiclient.StartRunRequest{SessionID: "s-cancel", Message: "long",
		Metadata: simMeta(map[string]any{"tokens": 100000, "token_ms": 5, "tools": 0})})
	if err != nil {
		t.Fatal(err)
	}
	r := newRelayed()
	wait := relay(ctx, c, st.RunID, nil, r)
	r.waitFor(t, "a token", named("token"))
	res, err := c.CancelRun(ctx, st.RunID)
	if err != nil || !res.Accepted {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	fs := r.snapshot()
	checkFrames(t, st.RunID, fs, 0)
	last := fs[len(fs)-1]
	if last.Event != "cancel" || last.Data.(map[string]any)["type"] != "cancelled" || last.ID == "" {
		t.Fatalf("last frame: %+v", last)
	}
	if res, err := c.CancelRun(ctx, st.RunID); err != nil || res.Accepted || res.Status != "not-active" {
		t.Fatalf("second cancel: %+v %v", res, err)
	}
	if run, _ := c.GetRun(ctx, st.RunID); run.TerminalState != "cancelled" {
		t.Fatalf("get_run: %+v", run)
	}
	// A second run in the same session starts once the first ended.
	if _, err := c.StartRun(ctx, webuiclient.StartRunRequest{SessionID: "s-cancel", Message: "again",
		Metadata: simMeta(map[string]any{"tokens": 1})}); err != nil {
		t.Fatal(err)
	}
}

// Queue and goal: a message queued while the run streams starts the next
// run when it ends; a goal is set, reported and cleared.
func TestWebUIQueueGoal(t *testing.T) {
	th := newWebUIHub(t, hub.Config{}, hermeswebui.RunnerOptions{})
	c := webuiclient.New(th.runner, "")
	ctx := hubtest.Ctx(t, 30*time.Second)
	st, err := c.StartRun(ctx, webuiclient.StartRunRequest{SessionID: "s-queue", Message: "first",
		Metadata: simMeta(map[string]any{"tokens": 40, "token_ms": 10, "tools": 0})})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.QueueMessage(ctx, st.RunID, "second", "")
	if err != nil || !res.Accepted || res.Status != "accepted" {
		t.Fatalf("queue: %+v %v", res, err)
	}
	if err := relay(ctx, c, st.RunID, nil, newRelayed())(); err != nil {
		t.Fatal(err)
	}
	// The queued message became the session's next run.
	var runs struct {
		Runs []struct {
			RunID string `json:"run_id"`
		} `json:"runs"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(runs.Runs) < 2 && time.Now().Before(deadline) {
		hubtest.Do(t, "GET", th.URL+"/v1/sessions/s-queue/runs", "", nil, &runs)
		time.Sleep(20 * time.Millisecond)
	}
	if len(runs.Runs) != 2 {
		t.Fatalf("runs after the queue drained: %+v", runs)
	}
	if res, err := c.UpdateGoal(ctx, "s-queue", "set", "ship it"); err != nil || !res.Accepted {
		t.Fatalf("goal set: %+v %v", res, err)
	}
	if res, err := c.UpdateGoal(ctx, "s-queue", "clear", ""); err != nil || !res.Accepted {
		t.Fatalf("goal clear: %+v %v", res, err)
	}
	if res, err := c.UpdateGoal(ctx, "s-queue", "bogus", ""); err == nil {
		t.Fatalf("goal bogus: %+v", res)
	} else if e := new(webuiclient.Error); !errors.As(err, &e) || e.Status != 400 {
		t.Fatalf("goal bogus: %v", err)
	}
}

// A relay that stops mid-run (the browser left, or WebUI restarted) and a
// new client that re-attaches from the cursor (as a bare seq, as WebUI
// sends it, or as run:seq) together see every event once: no gap, no
// repeat, the same terminal; and cancel still works on the re-attached
// run.
func TestWebUIResumeAndRestart(t *testing.T) {
	th := newWebUIHub(t, hub.Config{}, hermeswebui.RunnerOptions{})
	for _, form := range []string{"bare", "run:seq"} {
		t.Run(form, func(t *testing.T) {
			ctx := hubtest.Ctx(t, 60*time.Second)
			first := webuiclient.New(th.runner, "")
			sid := "s-resume-" + strings.ReplaceAll(form, ":", "-")
			st, err := first.StartRun(ctx, webuiclient.StartRunRequest{SessionID: sid, Message: "long",
				Metadata: simMeta(map[string]any{"tokens": 30, "token_ms": 20, "tools": 1, "reasoning": 2})})
			if err != nil {
				t.Fatal(err)
			}
			r1 := newRelayed()
			ctx1, stop := context.WithCancel(ctx)
			wait := relay(ctx1, first, st.RunID, nil, r1)
			r1.waitFor(t, "the 5th token", func(webuiclient.Frame) bool {
				n := 0
				for _, f := range r1.snapshot() {
					if f.Event == "token" {
						n++
					}
				}
				return n >= 5
			})
			stop() // the WebUI process goes away mid-run
			wait()
			before := r1.snapshot()
			lastID := before[len(before)-1].ID
			_, seqText, _ := strings.Cut(lastID, ":")
			cursor := seqText
			if form == "run:seq" {
				cursor = lastID
			}
			seq, _ := strconv.ParseUint(seqText, 10, 64)
			// A restarted WebUI: a new client, only the cursor kept.
			second := webuiclient.New(th.runner, "")
			r2 := newRelayed()
			if err := relay(ctx, second, st.RunID, &cursor, r2)(); err != nil {
				t.Fatal(err)
			}
			after := r2.snapshot()
			checkFrames(t, st.RunID, after, seq)
			all := append(before, after...)
			if text := checkFrames(t, st.RunID, all, 0); text != sim.Text(30) {
				t.Fatalf("text across the restart %q, want %q", text, sim.Text(30))
			}
			if all[len(all)-1].Event != "stream_end" {
				t.Fatalf("frames %v", names(all))
			}
			// Every journaled event of the run reached one relay or the other.
			full := newRelayed()
			if err := relay(ctx, webuiclient.New(th.runner, ""), st.RunID, nil, full)(); err != nil {
				t.Fatal(err)
			}
			if len(full.snapshot()) != len(all) {
				t.Fatalf("%d frames across the restart, %d in one pass", len(all), len(full.snapshot()))
			}
		})
	}
	t.Run("cancel after re-attach", func(t *testing.T) {
		ctx := hubtest.Ctx(t, 30*time.Second)
		st, err := webuiclient.New(th.runner, "").StartRun(ctx, webuiclient.StartRunRequest{SessionID: "s-reattach", Message: "long",
			Metadata: simMeta(map[string]any{"tokens": 100000, "token_ms": 5, "tools": 0})})
		if err != nil {
			t.Fatal(err)
		}
		restarted := webuiclient.New(th.runner, "")
		cursor := "2"
		r := newRelayed()
		wait := relay(ctx, restarted, st.RunID, &cursor, r)
		r.waitFor(t, "a token", named("token"))
		if res, err := restarted.CancelRun(ctx, st.RunID); err != nil || !res.Accepted {
			t.Fatalf("cancel: %+v %v", res, err)
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		fs := r.snapshot()
		checkFrames(t, st.RunID, fs, 2)
		if fs[len(fs)-1].Event != "cancel" {
			t.Fatalf("frames %v", names(fs))
		}
	})
}

// The events poll of a live run with nothing new holds until the next
// event instead of answering empty (WebUI would sleep 5 s).
func TestWebUIEventsLongPoll(t *testing.T) {
	th := newWebUIHub(t, hub.Config{}, hermeswebui.RunnerOptions{})
	c := webuiclient.New(th.runner, "")
	ctx := hubtest.Ctx(t, 30*time.Second)
	st, err := c.StartRun(ctx, webuiclient.StartRunRequest{SessionID: "s-poll", Message: "go",
		Metadata: simMeta(map[string]any{"tokens": 2, "token_ms": 1, "approval": true})})
	if err != nil {
		t.Fatal(err)
	}
	var cursor *string
	aid := ""
	for aid == "" {
		es, err := c.ObserveRun(ctx, st.RunID, cursor)
		if err != nil {
			t.Fatal(err)
		}
		if len(es.Events) == 0 {
			t.Fatal("an empty answer while the run was live")
		}
		for _, e := range es.Events {
			if e["event"] == "approval" {
				aid = e["payload"].(map[string]any)["approval_id"].(string)
			}
		}
		cursor = es.Cursor
	}
	got := make(chan webuiclient.RunEventStream, 1)
	go func() {
		es, err := c.ObserveRun(ctx, st.RunID, cursor)
		if err != nil {
			t.Error(err)
		}
		got <- es
	}()
	select {
	case es := <-got:
		t.Fatalf("the poll answered while the run waited for approval: %v", es.Events)
	case <-time.After(300 * time.Millisecond):
	}
	if res, err := c.RespondApproval(ctx, st.RunID, aid, "once"); err != nil || !res.Accepted {
		t.Fatalf("approval: %+v %v", res, err)
	}
	es := <-got
	if len(es.Events) == 0 {
		t.Fatal("the held poll answered empty")
	}
	// A finished run answers at once, empty, past its end.
	var end *string
	for {
		es, err := c.ObserveRun(ctx, st.RunID, cursor)
		if err != nil {
			t.Fatal(err)
		}
		cursor = es.Cursor
		if len(es.Events) > 0 && es.Events[len(es.Events)-1]["event"] == "stream_end" {
			end = cursor
			break
		}
	}
	es, err = c.ObserveRun(ctx, st.RunID, end)
	if err != nil || len(es.Events) != 0 {
		t.Fatalf("past the end: %v %v", es.Events, err)
	}
}

// Bad input: a missing session_id or message names it (400), an unknown
// profile is 404, a body over the limit 413, a bad cursor 400; unknown
// fields are ignored and a newer WebUI's owner fence is echoed accepted.
func TestWebUIBadInput(t *testing.T) {
	var logs lockedBuffer
	th := newWebUIHub(t, hub.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, hermeswebui.RunnerOptions{})
	c := webuiclient.New(th.runner, "")
	ctx := hubtest.Ctx(t, 30*time.Second)
	status := func(err error) (int, string) {
		var e *webuiclient.Error
		if !errors.As(err, &e) {
			t.Fatalf("not a runner error: %v", err)
		}
		return e.Status, e.Msg
	}
	if _, err := c.StartRun(ctx, webuiclient.StartRunRequest{Message: "hi"}); err == nil {
		t.Fatal("a start without session_id")
	} else if s, msg := status(err); s != 400 || !strings.Contains(msg, "session_id") {
		t.Fatalf("no session_id: %d %s", s, msg)
	}
	if _, err := c.Post(ctx, "/v1/runs", []byte(`{"session_id":"s-bad"}`)); err == nil {
		t.Fatal("a start without message")
	} else if s, msg := status(err); s != 400 || !strings.Contains(msg, "message") {
		t.Fatalf("no message: %d %s", s, msg)
	}
	if _, err := c.StartRun(ctx, webuiclient.StartRunRequest{SessionID: "s-bad", Message: "hi", Profile: ptr("nope")}); err == nil {
		t.Fatal("an unknown profile")
	} else if s, msg := status(err); s != 404 || !strings.Contains(msg, "profile") {
		t.Fatalf("unknown profile: %d %s", s, msg)
	}
	// WebUI shows its browser a bare 500 for a failed start: runhub's log
	// says why.
	if l := logs.String(); !strings.Contains(l, "hermes-webui start refused") || !strings.Contains(l, "unknown profile") {
		t.Fatalf("the refused start is not in the log:\n%s", l)
	}
	big := `{"session_id":"s-bad","message":"` + strings.Repeat("x", 2<<20) + `"}`
	if _, err := c.Post(ctx, "/v1/runs", []byte(big)); err == nil {
		t.Fatal("a huge body")
	} else if s, _ := status(err); s != 413 {
		t.Fatalf("huge body: %d", s)
	}
	if _, err := c.StartRun(ctx, webuiclient.StartRunRequest{SessionID: "bad id/with slash", Message: "hi"}); err == nil {
		t.Fatal("a bad session id")
	} else if s, msg := status(err); s != 400 || !strings.Contains(msg, "session_id") {
		t.Fatalf("bad session id: %d %s", s, msg)
	}
	p, err := c.Post(ctx, "/v1/runs", []byte(`{"session_id":"s-extra","message":"hi","zzz":{"a":1},"reasoning_effort":"high",
		"workspace":null,"profile":null,"metadata":{"sim":{"tokens":1}}}`))
	if err != nil || p["run_id"] == "" {
		t.Fatalf("unknown fields: %v %v", p, err)
	}
	fence := map[string]any{"session_id": "s-fence", "profile": "default", "profile_home": "/h", "generation": "7", "version": "1",
		"route": map[string]any{"workspace": "/w", "model": "m", "provider": "p"}}
	st, err := c.StartRun(ctx, webuiclient.StartRunRequest{SessionID: "s-fence", Message: "hi", OwnerFence: fence,
		Metadata: simMeta(map[string]any{"tokens": 1})})
	if err != nil {
		t.Fatalf("owner fence: %v", err)
	}
	if acc := st.Payload["owner_fence"].(map[string]any); acc["accepted"] != true || acc["generation"] != "7" {
		t.Fatalf("owner fence echo: %v", acc)
	}
	if _, err := c.ObserveRun(ctx, st.RunID, ptr("x:1")); err == nil {
		t.Fatal("a cursor of another run")
	} else if s, _ := status(err); s != 400 {
		t.Fatalf("foreign cursor: %d", s)
	}
	if _, err := c.ObserveRun(ctx, st.RunID, ptr("abc")); err == nil {
		t.Fatal("a malformed cursor")
	} else if s, _ := status(err); s != 400 {
		t.Fatalf("malformed cursor: %d", s)
	}
	if _, err := c.GetRun(ctx, "r_nosuch"); err == nil {
		t.Fatal("an unknown run")
	} else if s, _ := status(err); s != 404 {
		t.Fatalf("unknown run: %d", s)
	}
	// A second start while the session's run is active is a clear 409.
	long, err := c.StartRun(ctx, webuiclient.StartRunRequest{SessionID: "s-busy", Message: "long",
		Metadata: simMeta(map[string]any{"tokens": 100000, "token_ms": 5})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartRun(ctx, webuiclient.StartRunRequest{SessionID: "s-busy", Message: "again"}); err == nil {
		t.Fatal("a second active run")
	} else if s, msg := status(err); s != 409 || !strings.Contains(msg, long.RunID) {
		t.Fatalf("busy: %d %s", s, msg)
	}
	c.CancelRun(ctx, long.RunID)
}

// Keys: a static runner key acts as its subject, a runhub JWT as its own;
// no key reads or drives another subject's sessions or runs, and a
// request without a valid key is 401.
func TestWebUISubjects(t *testing.T) {
	th := newWebUIHub(t, hubtest.WithAuth(t, hub.Config{}), hermeswebui.RunnerOptions{Keys: map[string]string{"alice-runner-key": "alice"}})
	alice := webuiclient.New(th.runner, "alice-runner-key")
	bob := webuiclient.New(th.runner, hubtest.Token(t, "bob", time.Hour, ""))
	ctx := hubtest.Ctx(t, 30*time.Second)
	st, err := alice.StartRun(ctx, webuiclient.StartRunRequest{SessionID: "s-alice", Message: "mine",
		Metadata: simMeta(map[string]any{"tokens": 100000, "token_ms": 5, "approval": true})})
	if err != nil {
		t.Fatal(err)
	}
	var aid string
	r := newRelayed()
	actx, stop := context.WithCancel(ctx)
	wait := relay(actx, alice, st.RunID, nil, r)
	aid = r.waitFor(t, "approval", named("approval")).Data.(map[string]any)["approval_id"].(string)
	stop()
	wait()
	refused := func(what string, err error) {
		t.Helper()
		var e *webuiclient.Error
		if !errors.As(err, &e) || e.Status != 404 {
			t.Fatalf("bob %s: %v, want 404", what, err)
		}
	}
	_, err = bob.ObserveRun(ctx, st.RunID, nil)
	refused("observe", err)
	_, err = bob.GetRun(ctx, st.RunID)
	refused("get_run", err)
	_, err = bob.CancelRun(ctx, st.RunID)
	refused("cancel", err)
	_, err = bob.RespondApproval(ctx, st.RunID, aid, "once")
	refused("approval", err)
	_, err = bob.QueueMessage(ctx, st.RunID, "x", "")
	refused("queue", err)
	_, err = bob.UpdateGoal(ctx, "s-alice", "set", "x")
	refused("goal", err)
	_, err = bob.StartRun(ctx, webuiclient.StartRunRequest{SessionID: "s-alice", Message: "theirs"})
	refused("start in alice's session", err)
	for _, k := range []string{"", "wrong-key"} {
		_, err := webuiclient.New(th.runner, k).GetRun(ctx, st.RunID)
		var e *webuiclient.Error
		if !errors.As(err, &e) || e.Status != 401 {
			t.Fatalf("key %q: %v, want 401", k, err)
		}
	}
	// Bob's own session works with his JWT; alice's run is untouched.
	if _, err := bob.StartRun(ctx, webuiclient.StartRunRequest{SessionID: "s-bob", Message: "his",
		Metadata: simMeta(map[string]any{"tokens": 1})}); err != nil {
		t.Fatal(err)
	}
	if run, err := alice.GetRun(ctx, st.RunID); err != nil || run.PendingApprovalID != aid {
		t.Fatalf("alice's run after bob: %+v %v", run, err)
	}
	if res, err := alice.CancelRun(ctx, st.RunID); err != nil || !res.Accepted {
		t.Fatalf("alice cancels: %+v %v", res, err)
	}
}

// A run that fails ends the relay on apperror (no stream_end follows, as
// in WebUI), and its status is failed.
func TestWebUIFailure(t *testing.T) {
	th := newWebUIHub(t, hub.Config{}, hermeswebui.RunnerOptions{})
	c := webuiclient.New(th.runner, "")
	ctx := hubtest.Ctx(t, 30*time.Second)
	st, err := c.StartRun(ctx, webuiclient.StartRunRequest{SessionID: "s-fail", Message: "fail",
		Metadata: simMeta(map[string]any{"tokens": 4, "token_ms": 1, "tools": 0, "fail": "error"})})
	if err != nil {
		t.Fatal(err)
	}
	r := newRelayed()
	if err := relay(ctx, c, st.RunID, nil, r)(); err != nil {
		t.Fatal(err)
	}
	fs := r.snapshot()
	checkFrames(t, st.RunID, fs, 0)
	last := fs[len(fs)-1]
	d := last.Data.(map[string]any)
	if last.Event != "apperror" || d["type"] != "provider_error" || d["message"] == "" || last.ID == "" {
		t.Fatalf("last frame %+v", last)
	}
	if run, err := c.GetRun(ctx, st.RunID); err != nil || run.TerminalState != "failed" || run.Status != "failed" {
		t.Fatalf("get_run %+v %v", run, err)
	}
	// A relay that re-attaches past the end stops at once on get_run.
	cur := last.ID
	r2 := newRelayed()
	if err := relay(ctx, c, st.RunID, &cur, r2)(); err != nil {
		t.Fatal(err)
	}
	if fs := r2.snapshot(); len(fs) != 1 || fs[0].Event != "stream_end" || fs[0].Data.(map[string]any)["status"] != "failed" || c.Sleeps() != 0 {
		t.Fatalf("re-attach past the end: %v (sleeps %d)", fs, c.Sleeps())
	}
}
