package executor_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/bolt"
	"github.com/runhub/runhub/protocol"
)

// outage refuses every non-terminal append after run.started with an
// unavailable journal while down is set.
type outage struct {
	*bolt.Store
	down atomic.Bool
}

func (o *outage) Append(ctx context.Context, e protocol.Envelope, key string) (protocol.Envelope, error) {
	if o.down.Load() && !e.Terminal {
		return protocol.Envelope{}, fmt.Errorf("journal/redis: append: %w", journal.ErrUnavailable)
	}
	return o.Store.Append(ctx, e, key)
}

// emitting emits a token, then the journal goes away, then it emits again.
type emitting struct{ o *outage }

func (d emitting) Execute(ctx context.Context, x *driver.Execution) (*protocol.Usage, error) {
	if _, err := x.Emit(ctx, protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m", Text: "one "}); err != nil {
		return nil, err
	}
	d.o.down.Store(true)
	_, err := x.Emit(ctx, protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m", Text: "two "})
	d.o.down.Store(false)
	return nil, err
}

// A run whose events the journal refuses for longer than AppendRetry ends
// interrupted (not internal), with the last seq the journal holds, and the
// message docs/protocol.md quotes.
func TestJournalOutageInterruptsTheRun(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "journal.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	o := &outage{Store: store}
	rt := executor.New(o, executor.Options{Drivers: map[string]driver.Driver{"emit": emitting{o}}, DefaultDriver: "emit",
		AppendRetry: 200 * time.Millisecond})
	defer rt.Close()
	ctx := context.Background()
	res, err := rt.StartRun(ctx, "local", protocol.StartRunRequest{Message: "go"})
	if err != nil {
		t.Fatal(err)
	}
	var events []protocol.Envelope
	deadline := time.Now().Add(10 * time.Second)
	for {
		events = events[:0]
		if err := journal.ReadAll(ctx, store, res.RunID, 0, func(e protocol.Envelope) error { events = append(events, e); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(events) > 0 && events[len(events)-1].Terminal {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not end: %d events", len(events))
		}
		time.Sleep(10 * time.Millisecond)
	}
	last := events[len(events)-1]
	p, err := protocol.DecodePayload[protocol.ErrorPayload](&last)
	if err != nil || last.Type != protocol.EventError || p.Code != protocol.ErrorInterrupted || p.LastSeq != last.Seq-1 {
		t.Fatalf("the run ends with %s %s, want error interrupted with last_seq %d", last.Type, last.Payload, last.Seq-1)
	}
	if !strings.Contains(string(doc), strconv.Quote(p.Message)) {
		t.Errorf("docs/protocol.md does not quote the message %q", p.Message)
	}
}
