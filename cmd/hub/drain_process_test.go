package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/protocol"
)

// startOverHTTP posts a sim start to session sid and returns the answer's
// status, Retry-After and error code.
func startOverHTTP(t *testing.T, p *hubProcess, sid string) (int, string, string) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Post(p.URL()+"/v1/sessions/"+sid+"/runs", "application/json", strings.NewReader(`{"message":"one more","metadata":{"sim":{"tokens":5}}}`))
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body protocol.ErrorBody
	json.Unmarshal(b, &body)
	code := ""
	if body.Error != nil {
		code = string(body.Error.Code)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), code
}

// SIGTERM during a 3 s run of the embedded hub: new starts are refused
// with 503 and Retry-After, /readyz says draining, the run finishes while
// the tab watches (done, not interrupted), then the tab gets goaway and
// close 1012, and the process exits 0. After a restart the run is
// completed, whole.
func TestProcess_SIGTERMLetsRunsFinish(t *testing.T) {
	data := t.TempDir()
	p := startHub(t, data)
	var other protocol.CreateSessionResult
	if code := call(t, "POST", p.URL()+"/v1/sessions", map[string]string{"title": "later"}, &other); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	ta := dialTab(t, p)
	res := ta.start(`{"tokens":100,"token_ms":30,"tools":0}`)
	if err := ta.c.Focus(ta.ctx(), res.SessionID, ""); err != nil {
		t.Fatal(err)
	}
	ta.until(10*time.Second, "10 tokens", func() bool { return count(ta.run(res.RunID), protocol.EventTokenDelta) >= 10 })

	exited := p.sigterm()
	sigAt := time.Now()
	var status int
	var retry, code string
	waitFor(t, 5*time.Second, "a start refused with 503", func() bool {
		status, retry, code = startOverHTTP(t, p, other.SessionID)
		return status != http.StatusAccepted
	})
	if status != http.StatusServiceUnavailable || retry == "" || code != string(protocol.CodeUnavailable) {
		t.Fatalf("a start while draining: %d, Retry-After %q, code %q; want 503, a Retry-After, unavailable", status, retry, code)
	}
	if r := readyz(p); r != http.StatusServiceUnavailable {
		t.Errorf("/readyz while draining: %d, want 503", r)
	}
	ta.until(15*time.Second, "the run's end", func() bool { return ta.terminal(res.RunID) })
	if last := ta.run(res.RunID)[len(ta.run(res.RunID))-1]; last.Type != protocol.EventDone {
		t.Fatalf("the run ended %s %s, want done", last.Type, last.Payload)
	}
	cerr := ta.drain(15 * time.Second)
	if len(ta.goaway) != 1 || client.CloseStatus(cerr) != protocol.CloseServiceRestart {
		t.Fatalf("after the run: goaway %+v, close %v; want one goaway and 1012", ta.goaway, cerr)
	}
	if err := exited(20 * time.Second); err != nil {
		t.Fatalf("exit: %v\n%s", err, p.out.String())
	}
	if took := time.Since(sigAt); took > 10*time.Second {
		t.Errorf("the stop took %v for a 3 s run", took)
	}
	if out := p.out.String(); !strings.Contains(out, "draining: new runs are refused") || strings.Contains(out, "grace period over") {
		t.Errorf("the log does not show a drain that finished:\n%s", out)
	}

	p = startHub(t, data)
	var st protocol.RunStatus
	if code := call(t, "GET", p.URL()+"/v1/runs/"+res.RunID, nil, &st); code != 200 || st.Status != protocol.StatusCompleted {
		t.Fatalf("after the restart: %d %+v, want completed", code, st)
	}
	checkDone(t, "the run SIGTERM let finish", allEvents(t, p.URL(), res.RunID), 100)
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
}

// A run still going when the grace ends is ended interrupted, as before,
// and the tab sees that before the goaway.
func TestProcess_SIGTERMPastGraceInterrupts(t *testing.T) {
	data := t.TempDir()
	p := startHub(t, data, "RUNHUB_SHUTDOWN_GRACE=1s")
	ta := dialTab(t, p)
	res := ta.start(`{"tokens":100000,"token_ms":20,"tools":0}`)
	if err := ta.c.Focus(ta.ctx(), res.SessionID, ""); err != nil {
		t.Fatal(err)
	}
	ta.until(10*time.Second, "5 tokens", func() bool { return count(ta.run(res.RunID), protocol.EventTokenDelta) >= 5 })
	exited := p.sigterm()
	ta.until(10*time.Second, "the run's end", func() bool { return ta.terminal(res.RunID) })
	evs := ta.run(res.RunID)
	last := evs[len(evs)-1]
	if ep, _ := protocol.DecodePayload[protocol.ErrorPayload](&last); last.Type != protocol.EventError || ep.Code != protocol.ErrorInterrupted {
		t.Fatalf("the run ended %s %s, want error interrupted", last.Type, last.Payload)
	}
	if cerr := ta.drain(15 * time.Second); len(ta.goaway) != 1 || client.CloseStatus(cerr) != protocol.CloseServiceRestart {
		t.Fatalf("goaway %+v, close %v", ta.goaway, cerr)
	}
	if err := exited(20 * time.Second); err != nil {
		t.Fatalf("exit: %v\n%s", err, p.out.String())
	}
	if !strings.Contains(p.out.String(), "grace period over; ending the remaining runs as interrupted") {
		t.Errorf("the log does not say the grace ended:\n%s", p.out.String())
	}
	p = startHub(t, data)
	events := allEvents(t, p.URL(), res.RunID)
	if terminals(events) != 1 {
		t.Fatalf("%d terminal events after the restart", terminals(events))
	}
}

// A second SIGTERM during the drain ends the process at once; the run it
// left open ends interrupted at the next start, exactly once.
func TestProcess_SecondSignalStopsAtOnce(t *testing.T) {
	data := t.TempDir()
	p := startHub(t, data)
	ta := dialTab(t, p)
	res := ta.start(`{"tokens":100000,"token_ms":20,"tools":0}`)
	if err := ta.c.Focus(ta.ctx(), res.SessionID, ""); err != nil {
		t.Fatal(err)
	}
	ta.until(10*time.Second, "5 tokens", func() bool { return count(ta.run(res.RunID), protocol.EventTokenDelta) >= 5 })
	exited := p.sigterm()
	waitFor(t, 5*time.Second, "the drain", func() bool { return strings.Contains(p.out.String(), "draining: new runs are refused") })
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := exited(5 * time.Second); err != nil && strings.Contains(err.Error(), "no exit") {
		t.Fatalf("a second SIGTERM did not end the process: %v\n%s", err, p.out.String())
	}
	p = startHub(t, data)
	var st protocol.RunStatus
	if code := call(t, "GET", p.URL()+"/v1/runs/"+res.RunID, nil, &st); code != 200 || st.Status != protocol.StatusInterrupted {
		t.Fatalf("after the restart: %d %+v, want interrupted", code, st)
	}
	if n := terminals(allEvents(t, p.URL(), res.RunID)); n != 1 {
		t.Fatalf("%d terminal events", n)
	}
}
