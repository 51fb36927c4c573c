package main

import (
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/protocol"
)

// A Hermes run outlives the hub process (embedded journal): Hermes keeps
// running it, and the restarted hub follows it again (driver.Reattacher)
// instead of ending it interrupted. The Hermes server is queueHermes: its
// event stream is one queue per run, without ids or replay, dropped once
// Hermes notices the hub's connection went.

// startHermesRun starts a run of the hermes profile in a new session.
func startHermesRun(t *testing.T, p *hubProcess) string {
	t.Helper()
	var sess protocol.CreateSessionResult
	if code := call(t, "POST", p.URL()+"/v1/sessions", map[string]string{"title": "restart me"}, &sess); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	var run protocol.RunStartResult
	if code := call(t, "POST", p.URL()+"/v1/sessions/"+sess.SessionID+"/runs", map[string]any{"message": "the question", "profile": "hermes"}, &run); code != 202 {
		t.Fatalf("start: %d", code)
	}
	return run.RunID
}

// waitEvents polls the run's events until ok accepts them.
func waitEvents(t *testing.T, p *hubProcess, runID, what string, ok func([]protocol.Envelope) bool) []protocol.Envelope {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs := allEvents(t, p.URL(), runID)
		if ok(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s; events %s\nlogs:\n%s", what, typesOf(evs), p.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func typesOf(evs []protocol.Envelope) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(string(e.Type) + " ")
	}
	return b.String()
}

// ended waits for the run's terminal event and checks the run's events:
// seq from 1 without a gap, exactly one terminal event, the last.
func ended(t *testing.T, p *hubProcess, runID string) []protocol.Envelope {
	t.Helper()
	evs := waitEvents(t, p, runID, "terminal event", func(evs []protocol.Envelope) bool {
		return len(evs) > 0 && evs[len(evs)-1].Terminal
	})
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
		if e.Terminal && i != len(evs)-1 {
			t.Fatalf("a terminal event before the last: %s", typesOf(evs))
		}
	}
	return evs
}

// wantDone checks the run ended done with result, the journaled text is
// text (nothing twice, nothing lost) and the run was followed again after
// a restart.
func wantDone(t *testing.T, p *hubProcess, evs []protocol.Envelope, result, text string) {
	t.Helper()
	last := evs[len(evs)-1]
	d, _ := protocol.DecodePayload[protocol.DonePayload](&last)
	if last.Type != protocol.EventDone || d.Result != result {
		t.Fatalf("terminal %s %s, want done with result %q\nlogs:\n%s", last.Type, last.Payload, result, p.out.String())
	}
	if got := tokenText(evs); got != text {
		t.Errorf("journaled text %q, want %q", got, text)
	}
	if !strings.Contains(typesOf(evs), "progress") || !strings.Contains(p.out.String(), "re-attached a run a previous process left executing") {
		t.Errorf("no re-attach logged; events %s", typesOf(evs))
	}
}

// restartAgain stops the hub, starts it again on data and checks the run
// still has its one terminal event, of type typ.
func restartAgain(t *testing.T, p *hubProcess, data string, env []string, runID string, typ protocol.EventType) {
	t.Helper()
	if err := p.stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, p.out.String())
	}
	p = startHub(t, data, env...)
	evs := ended(t, p, runID)
	if last := evs[len(evs)-1]; last.Type != typ {
		t.Fatalf("after another restart: terminal %s", last.Type)
	}
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
}

// A Hermes run streaming an answer in pieces: the first four journaled,
// then the hub goes (down), Hermes streams three more meanwhile, the hub
// is back (up), the rest comes and Hermes completes the run.
func answerScript(down, up <-chan struct{}) (func(r *qhRun), string, string) {
	words := []string{"The ", "answer ", "to ", "the ", "question ", "is ", "forty", "-two, ", "as ", "computed."}
	script := func(r *qhRun) {
		r.deltas(words[:4]...)
		if !r.await(down) {
			return
		}
		r.deltas(words[4:7]...) // the first is lost with the hub's connection
		if !r.await(up) {
			return
		}
		r.deltas(words[7:]...)
		r.complete(strings.Join(words, ""))
	}
	return script, strings.Join(words[:4], ""), strings.Join(words, "")
}

// SIGKILL the hub mid Hermes run, Hermes going on meanwhile, and start it
// again: the run is not interrupted and Hermes is not told to stop; the
// restarted hub follows the Hermes run (by its status: Hermes dropped the
// event stream when it noticed the hub's connection gone) and the run
// ends with exactly one terminal done carrying the whole answer, its text
// journaled once — the part journaled before the kill, then the rest.
func TestProcess_HermesKilledHubReattaches(t *testing.T) {
	down, up := make(chan struct{}), make(chan struct{})
	script, before, whole := answerScript(down, up)
	fh := newQueueHermes(t, script)
	data, env := t.TempDir(), hermesProfiles(t, fh.srv.URL)
	p := startHub(t, data, env...)
	rid := startHermesRun(t, p)
	waitEvents(t, p, rid, "text "+before, func(evs []protocol.Envelope) bool { return tokenText(evs) == before })
	p.kill()
	close(down)
	run := fh.only(t)
	for deadline := time.Now().Add(10 * time.Second); run.isRegistered(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Hermes did not notice the hub's connection gone")
		}
	}

	p = startHub(t, data, env...)
	close(up)
	evs := ended(t, p, rid)
	wantDone(t, p, evs, whole, whole)
	if !strings.Contains(p.out.String(), "following it by its status") {
		t.Errorf("the run was not followed by its status:\n%s", p.out.String())
	}
	if s := fh.stopCalls(); len(s) != 0 || fh.startCalls() != 1 {
		t.Errorf("stops %v, %d starts; want none and 1", s, fh.startCalls())
	}
	restartAgain(t, p, data, env, rid, protocol.EventDone)
}

// SIGTERM the hub mid Hermes run: the graceful shutdown leaves the Hermes
// run going (no stop, no terminal event) and the restarted hub re-attaches
// it as after a kill: one terminal done with the whole answer.
func TestProcess_HermesStoppedHubReattaches(t *testing.T) {
	down, up := make(chan struct{}), make(chan struct{})
	script, before, whole := answerScript(down, up)
	fh := newQueueHermes(t, script)
	data, env := t.TempDir(), hermesProfiles(t, fh.srv.URL)
	p := startHub(t, data, env...)
	rid := startHermesRun(t, p)
	waitEvents(t, p, rid, "text "+before, func(evs []protocol.Envelope) bool { return tokenText(evs) == before })
	if err := p.stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, p.out.String())
	}
	if !strings.Contains(p.out.String(), "left the run executing upstream") {
		t.Errorf("the shutdown did not leave the run:\n%s", p.out.String())
	}
	if s := fh.stopCalls(); len(s) != 0 {
		t.Fatalf("the shutdown stopped the Hermes run: %v", s)
	}
	close(down)

	p = startHub(t, data, env...)
	close(up)
	evs := ended(t, p, rid)
	wantDone(t, p, evs, whole, whole)
	for _, e := range evs {
		if e.Type == protocol.EventError {
			t.Errorf("an error event: %s", e.Payload)
		}
	}
	if s := fh.stopCalls(); len(s) != 0 || fh.startCalls() != 1 {
		t.Errorf("stops %v, %d starts; want none and 1", s, fh.startCalls())
	}
	restartAgain(t, p, data, env, rid, protocol.EventDone)
}

// Hermes itself restarted while the hub was down: it no longer knows the
// run (404). The restarted hub ends the run with exactly one clear error,
// and has nothing to stop.
func TestProcess_HermesGoneAfterRestart(t *testing.T) {
	down, up := make(chan struct{}), make(chan struct{})
	script, before, _ := answerScript(down, up)
	fh := newQueueHermes(t, script)
	data, env := t.TempDir(), hermesProfiles(t, fh.srv.URL)
	p := startHub(t, data, env...)
	rid := startHermesRun(t, p)
	waitEvents(t, p, rid, "text "+before, func(evs []protocol.Envelope) bool { return tokenText(evs) == before })
	p.kill()
	fh.forget()

	p = startHub(t, data, env...)
	evs := ended(t, p, rid)
	last := evs[len(evs)-1]
	ep, _ := protocol.DecodePayload[protocol.ErrorPayload](&last)
	if last.Type != protocol.EventError || ep.Code != protocol.ErrorInterrupted || !strings.Contains(ep.Message, "no longer knows") {
		t.Fatalf("terminal %s %s, want error interrupted saying Hermes no longer knows the run", last.Type, last.Payload)
	}
	if got := tokenText(evs); got != before {
		t.Errorf("text %q, want %q", got, before)
	}
	if s := fh.stopCalls(); len(s) != 0 {
		t.Errorf("stops %v", s)
	}
	restartAgain(t, p, data, env, rid, protocol.EventError)
}

// SIGKILL the hub while a Hermes run waits on an approval the run
// journaled: after the restart the approval waits on the user again (no
// second approval.requested); the user's choice reaches Hermes, which
// finishes the run: one approval.resolved, one done.
func TestProcess_HermesKilledAwaitingApproval(t *testing.T) {
	fh := newQueueHermes(t, func(r *qhRun) {
		r.deltas("Checking. ")
		if r.askApproval("make clean") == "" {
			return
		}
		r.deltas("Cleaned.")
		r.complete("Cleaned.") // the last assistant message: the one after the tool call
	})
	data, env := t.TempDir(), hermesProfiles(t, fh.srv.URL)
	p := startHub(t, data, env...)
	rid := startHermesRun(t, p)
	waitEvents(t, p, rid, "approval.requested", func(evs []protocol.Envelope) bool {
		return len(evs) > 0 && evs[len(evs)-1].Type == protocol.EventApprovalReq
	})
	p.kill()

	p = startHub(t, data, env...)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var res protocol.ControlResult
		code := call(t, "POST", p.URL()+"/v1/runs/"+rid+"/approvals/a1", map[string]string{"choice": "once"}, &res)
		if code == 200 && res.Status == protocol.ResultAccepted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("approve: %d %+v\n%s", code, res, p.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	evs := ended(t, p, rid)
	wantDone(t, p, evs, "Cleaned.", "Checking. Cleaned.")
	count := map[protocol.EventType]int{}
	for _, e := range evs {
		count[e.Type]++
	}
	if count[protocol.EventApprovalReq] != 1 || count[protocol.EventApprovalRes] != 1 {
		t.Errorf("%d approval.requested, %d approval.resolved; want 1 and 1: %s", count[protocol.EventApprovalReq], count[protocol.EventApprovalRes], typesOf(evs))
	}
	if s := fh.stopCalls(); len(s) != 0 {
		t.Errorf("stops %v", s)
	}
}
