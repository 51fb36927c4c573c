//go:build fault

package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/runhub/runhub/protocol"
)

// slowAgent is an OpenAI-compatible upstream in its own namespace that
// streams a chunk every 50 ms, 400 in all (20 s), until its caller goes.
func slowAgent(t *testing.T, d *partDeploy) string {
	t.Helper()
	nd := d.net.Node("agent")
	l, err := nd.Listen("tcp", nd.IP+":8000")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 400 {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d \"}}]}\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	d.agent = nd
	return "http://" + l.Addr().String() + "/v1"
}

// The path between a runner and its upstream agent (an OpenAI-compatible
// server in a namespace of its own) cut both ways, silently, mid-stream,
// while the runner still reaches Redis. A run whose stream goes silent
// ends once, `error` `timeout`, after the profile's idle timeout (2 s);
// a run cancelled during the cut ends once, `cancelled`, at once (the
// cancel reaches the runner through Redis; the upstream need not answer).
// The runner's leases stay (no `interrupted`); healed, a run completes.
func TestFault_PartitionRunnerFromUpstream(t *testing.T) {
	d := newPartDeploy(t)
	base := slowAgent(t, d)
	file := filepath.Join(t.TempDir(), "profiles.json")
	os.WriteFile(file, []byte(fmt.Sprintf(`{"default":"agent","profiles":{"agent":{"driver":"openai","base_url":%q,"model":"m","idle_timeout":"2s"}}}`, base)), 0o600)
	env := []string{"RUNHUB_PROFILES=" + file}
	a := d.hub("hub-a", env...)
	r := d.runner("runner-1", env...)
	var iv invariants
	ta := d.tab(a)
	startAgent := func() protocol.ControlResult {
		res, err := ta.c.Control(ta.ctx(), protocol.Control{Op: protocol.OpStart, SessionID: "", Message: "go"})
		if err != nil || !res.Accepted {
			t.Fatalf("start: %+v %v", res, err)
		}
		ta.c.Focus(ta.ctx(), res.SessionID, "")
		ta.until(20*time.Second, "10 tokens", func() bool { return count(ta.run(res.RunID), protocol.EventTokenDelta) >= 10 })
		return res
	}

	// Silent upstream: the idle timeout ends the run.
	one := startAgent()
	d.net.Cut(r.node, d.agent)
	cut := time.Now()
	ta.until(30*time.Second, "the silent run's end", func() bool { return ta.terminal(one.RunID) })
	idle := time.Since(cut)
	ev := iv.checkRun(t, a.hubProcess, one.RunID)
	if ep := lastError(t, ev); ep.Code != protocol.ErrorTimeout {
		t.Fatalf("the silent run ended %+v, want timeout", ep)
	}
	sameEvents(t, "the tab vs. the journal", ta.run(one.RunID), ev)
	iv.checkAcked(t, "the tab", ta.run(one.RunID), ev)
	d.net.Heal(r.node, d.agent)

	// Cancelled during a cut: at once.
	two := startAgent()
	d.net.Cut(r.node, d.agent)
	cr, err := ta.c.Control(ta.ctx(), protocol.Control{Op: protocol.OpCancel, RunID: two.RunID})
	if err != nil || cr.Status != protocol.ResultAccepted {
		t.Fatalf("cancel during the cut: %+v %v", cr, err)
	}
	ta.until(20*time.Second, "the cancelled run's end", func() bool { return ta.terminal(two.RunID) })
	ev = iv.checkRun(t, a.hubProcess, two.RunID)
	if last := ev[len(ev)-1]; last.Type != protocol.EventCancelled {
		t.Fatalf("the run cancelled during the cut ended %s %s", last.Type, last.Payload)
	}
	sameEvents(t, "the tab vs. the journal", ta.run(two.RunID), ev)
	iv.checkAcked(t, "the tab", ta.run(two.RunID), ev)
	if n := hubMetric(t, a.hubProcess, "runhub_lease_expiries_total"); n > 0 {
		t.Fatalf("%v leases expired: the runner reached Redis throughout", n)
	}

	// Healed: a run completes (the whole stream, 400 chunks in 20 s, is
	// more than this test needs: cancel it after 10 tokens flowed again).
	d.net.Heal(r.node, d.agent)
	healed := time.Now()
	three := startAgent()
	iv.converged = time.Since(healed)
	cancelHTTP(t, a.hubProcess, three.RunID)
	ta.until(20*time.Second, "the third run's end", func() bool { return ta.terminal(three.RunID) })
	iv.checkRun(t, a.hubProcess, three.RunID)
	noPanic(t, a.hubProcess)
	no500(t, a)
	t.Logf("runner ⟂ upstream: the silent run ended %v after the cut; %s", idle.Round(10*time.Millisecond), iv)
}
