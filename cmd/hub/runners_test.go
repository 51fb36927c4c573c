package main

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/protocol"
)

// runnerProcess is `hub runner` as a child process.
type runnerProcess struct {
	*child
	out *syncBuffer
}

func startRunner(t testing.TB, env ...string) *runnerProcess {
	t.Helper()
	r := &runnerProcess{out: &syncBuffer{}}
	cmd := exec.Command(os.Args[0], "runner")
	cmd.Env = append(append(os.Environ(), "RUNHUB_TEST_AS_HUB=1"), env...)
	cmd.Stdout, cmd.Stderr = r.out, r.out
	var err error
	if r.child, err = startChild(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.kill)
	return r
}

// A hub dispatching to a runner: the run executes in the runner, streams to
// the tab, and cancel and approval reach it through its control stream.
func TestRunners_ExecuteAndControl(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	env := []string{"RUNHUB_REDIS_URL=" + rs.URL(), "RUNHUB_LEASE_TTL=2s"}
	p := startHub(t, t.TempDir(), env...)
	startRunner(t, env...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tab, err := client.Dial(ctx, "ws://"+p.addr+"/v1/ws", client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()

	// 1. A plain run completes with the simulator's text.
	res, err := tab.Control(ctx, protocol.Control{Op: protocol.OpStart, Message: "via runner", Metadata: []byte(`{"sim":{"tokens":30,"token_ms":2}}`)})
	if err != nil || !res.Accepted {
		t.Fatalf("start: %+v %v", res, err)
	}
	tab.Focus(ctx, res.SessionID, "")
	events := readRun(t, ctx, tab, res.RunID)
	if got := tokenText(events); got != sim.Text(30) {
		t.Fatalf("text %q", got)
	}

	// 2. Approval answered through the hub reaches the runner.
	res, _ = tab.Control(ctx, protocol.Control{Op: protocol.OpStart, SessionID: res.SessionID, Message: "approve me",
		Metadata: []byte(`{"sim":{"tokens":5,"token_ms":1,"approval":true}}`)})
	var approvalID string
	for approvalID == "" {
		m, err := tab.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if em, ok := m.(*protocol.EventMessage); ok && em.Event.Type == protocol.EventApprovalReq && em.Event.RunID == res.RunID {
			p, _ := protocol.DecodePayload[protocol.ApprovalRequestedPayload](em.Event)
			approvalID = p.ApprovalID
		}
	}
	ar, err := tab.Control(ctx, protocol.Control{Op: protocol.OpApprove, RunID: res.RunID, ApprovalID: approvalID, Choice: "once"})
	if err != nil || ar.Status != protocol.ResultAccepted {
		t.Fatalf("approve: %+v %v", ar, err)
	}
	again, err := tab.Control(ctx, protocol.Control{Op: protocol.OpApprove, RunID: res.RunID, ApprovalID: approvalID, Choice: "once"})
	if err != nil || again.Status != protocol.ResultNotActive {
		t.Fatalf("second approve: %+v %v", again, err)
	}
	events = readRun(t, ctx, tab, res.RunID)
	if last := events[len(events)-1]; last.Type != protocol.EventDone {
		t.Fatalf("approved run ended %s", last.Type)
	}

	// 3. Cancel through the hub stops the run in the runner: one terminal.
	res, _ = tab.Control(ctx, protocol.Control{Op: protocol.OpStart, SessionID: res.SessionID, Message: "long",
		Metadata: []byte(`{"sim":{"tokens":5000,"token_ms":5}}`)})
	for n := 0; n < 10; {
		m, err := tab.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if em, ok := m.(*protocol.EventMessage); ok && em.Event.RunID == res.RunID && em.Event.Type == protocol.EventTokenDelta {
			n++
		}
	}
	cr, err := tab.Control(ctx, protocol.Control{Op: protocol.OpCancel, RunID: res.RunID})
	if err != nil || cr.Status != protocol.ResultAccepted {
		t.Fatalf("cancel: %+v %v", cr, err)
	}
	all := allEvents(t, p.URL(), res.RunID)
	for !all[len(all)-1].Terminal {
		time.Sleep(20 * time.Millisecond)
		all = allEvents(t, p.URL(), res.RunID)
	}
	terminals := 0
	for _, e := range all {
		if e.Terminal {
			terminals++
		}
	}
	last := all[len(all)-1]
	cp, _ := protocol.DecodePayload[protocol.CancelledPayload](&last)
	if terminals != 1 || last.Type != protocol.EventCancelled || !cp.Partial {
		t.Fatalf("after cancel: %d terminals, last %s %+v", terminals, last.Type, cp)
	}
}

// readRun reads the tab's events of runID until its terminal event.
func readRun(t *testing.T, ctx context.Context, tab *client.Conn, runID string) []protocol.Envelope {
	t.Helper()
	var out []protocol.Envelope
	for {
		m, err := tab.Next(ctx)
		if err != nil {
			t.Fatalf("reading run %s: %v (got %d events)", runID, err, len(out))
		}
		if em, ok := m.(*protocol.EventMessage); ok && em.Event.RunID == runID {
			out = append(out, *em.Event)
			if em.Event.Terminal {
				return out
			}
		}
	}
}

func tokenText(events []protocol.Envelope) string {
	var s string
	for _, e := range events {
		if e.Type == protocol.EventTokenDelta {
			p, _ := protocol.DecodePayload[protocol.TokenDeltaPayload](&e)
			s += p.Text
		}
	}
	return s
}
