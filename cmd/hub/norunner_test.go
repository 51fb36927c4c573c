package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/protocol"
)

// A hub on Redis with the default runtime (runners) and no runner: a start
// is accepted and queued, and says it waits for a runner in its answer,
// the run's status, the session's status (HTTP and the tab socket); the
// hub logs a warning naming `hub runner` and RUNHUB_RUNTIME=inprocess.
// Once a runner comes, it takes the queued run, and later starts no longer
// say they wait.
func TestRunners_NoRunnerSaysSo(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	env := []string{"RUNHUB_REDIS_URL=" + rs.URL(), "RUNHUB_LEASE_TTL=5s"}
	p := startHub(t, t.TempDir(), env...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var sess struct {
		SessionID string `json:"session_id"`
	}
	if code := call(t, http.MethodPost, p.URL()+"/v1/sessions", map[string]any{}, &sess); code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("create session: %d", code)
	}
	var res protocol.RunStartResult
	if code := call(t, http.MethodPost, p.URL()+"/v1/sessions/"+sess.SessionID+"/runs",
		map[string]any{"message": "anyone there?", "metadata": map[string]any{"sim": map[string]any{"tokens": 3, "token_ms": 1}}}, &res); code/100 != 2 {
		t.Fatalf("start: %d", code)
	}
	if res.Status != protocol.StatusQueued || res.Waiting != protocol.WaitingRunner ||
		!strings.Contains(res.Message, "hub runner") || !strings.Contains(res.Message, "RUNHUB_RUNTIME=inprocess") {
		t.Fatalf("start answer %+v: want queued, waiting runner, a message naming hub runner and RUNHUB_RUNTIME=inprocess", res)
	}
	var run protocol.RunStatus
	call(t, http.MethodGet, p.URL()+"/v1/runs/"+res.RunID, nil, &run)
	if run.Status != protocol.StatusQueued || run.Waiting != protocol.WaitingRunner {
		t.Fatalf("run status %+v: want queued, waiting runner", run)
	}
	var st protocol.SessionStatus
	call(t, http.MethodGet, p.URL()+"/v1/sessions/"+sess.SessionID, nil, &st)
	if st.Status != protocol.StatusQueued || st.Waiting != protocol.WaitingRunner {
		t.Fatalf("session status %+v: want queued, waiting runner", st)
	}
	tab, err := client.Dial(ctx, "ws://"+p.addr+"/v1/ws", client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	if err := tab.Watch(ctx, false, sess.SessionID); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := tab.Next(ctx)
		if err != nil {
			t.Fatalf("no status of the session on the socket: %v", err)
		}
		if sm, ok := m.(*protocol.StatusMessage); ok && sm.Session.SessionID == sess.SessionID {
			if sm.Session.Waiting != protocol.WaitingRunner {
				t.Fatalf("socket status %+v: want waiting runner", sm.Session)
			}
			break
		}
	}
	log := p.out.String()
	if !strings.Contains(log, "no runner process has been alive") || !strings.Contains(log, "`hub runner`") || !strings.Contains(log, "RUNHUB_RUNTIME=inprocess") {
		t.Fatalf("no warning naming hub runner and RUNHUB_RUNTIME=inprocess in the hub's log:\n%s", log)
	}

	// A runner comes: it takes the queued run, which completes.
	startRunner(t, env...)
	for {
		run = protocol.RunStatus{}
		call(t, http.MethodGet, p.URL()+"/v1/runs/"+res.RunID, nil, &run)
		if run.Terminal {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the queued run did not end once a runner came: %+v", run)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if run.TerminalState != protocol.StatusCompleted || run.Waiting != "" {
		t.Fatalf("run after the runner came: %+v", run)
	}
}
