package hubtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/protocol"
)

// Collector gathers what a socket receives.
type Collector struct {
	Events   []protocol.Envelope
	Statuses map[string]protocol.SessionStatus
	Replayed []protocol.Replayed
	Errors   []protocol.ErrorMessage
	Other    []any
}

// NewCollector is an empty Collector.
func NewCollector() *Collector {
	return &Collector{Statuses: map[string]protocol.SessionStatus{}}
}

// Add files one received message.
func (col *Collector) Add(m any) {
	switch v := m.(type) {
	case *protocol.EventMessage:
		col.Events = append(col.Events, *v.Event)
	case *protocol.StatusMessage:
		col.Statuses[v.Session.SessionID] = *v.Session
	case *protocol.Replayed:
		col.Replayed = append(col.Replayed, *v)
	case *protocol.ErrorMessage:
		col.Errors = append(col.Errors, *v)
	default:
		col.Other = append(col.Other, m)
	}
}

// Until reads messages into col until cond holds or d passes.
func (col *Collector) Until(t testing.TB, c *client.Conn, d time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for !cond() {
		m, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for %s: %v (events %d, statuses %v, errors %v)", what, err, len(col.Events), col.Statuses, col.Errors)
		}
		col.Add(m)
	}
}

// TerminalOf reports whether col has the terminal event of run.
func (col *Collector) TerminalOf(runID string) bool {
	for _, e := range col.Events {
		if e.RunID == runID && e.Terminal {
			return true
		}
	}
	return false
}

// CheckRun asserts the events of run are seq 1..N contiguous with exactly
// one terminal, last, and returns the concatenated token text.
func CheckRun(t testing.TB, events []protocol.Envelope, runID string) string {
	t.Helper()
	var text strings.Builder
	var want uint64 = 1
	terminals := 0
	for _, e := range events {
		if e.RunID != runID {
			continue
		}
		if e.Seq != want {
			t.Fatalf("run %s: got seq %d, want %d", runID, e.Seq, want)
		}
		want++
		if e.Terminal {
			terminals++
		} else if terminals > 0 {
			t.Fatalf("run %s: event %d after the terminal event", runID, e.Seq)
		}
		if e.Type == protocol.EventTokenDelta {
			p, err := protocol.DecodePayload[protocol.TokenDeltaPayload](&e)
			if err != nil {
				t.Fatal(err)
			}
			text.WriteString(p.Text)
		}
	}
	if terminals != 1 {
		t.Fatalf("run %s: %d terminal events, want 1", runID, terminals)
	}
	return text.String()
}
