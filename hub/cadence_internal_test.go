package hub

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/mem"
	"github.com/runhub/runhub/protocol"
)

// cadenceRig is a hub over a real embedded journal, in a synctest bubble,
// with sockets that have no writer: what the tracker offers them stays in
// their status queue, where the test takes it.
type cadenceRig struct {
	t     *testing.T
	h     *Hub
	store *mem.Store
	meta  journal.SessionMeta
	seq   int
}

func newCadenceRig(t *testing.T, interval time.Duration) *cadenceRig {
	return newCadenceRigWith(t, Config{StatusInterval: interval})
}

// newCadenceRigWith is newCadenceRig on a hub of cfg (its logger discards).
func newCadenceRigWith(t *testing.T, cfg Config) *cadenceRig {
	store := mem.New(mem.Options{})
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	h := New(cfg, store, nil)
	t.Cleanup(func() {
		h.Shutdown(context.Background())
		store.Close()
	})
	ctx := context.Background()
	meta := journal.SessionMeta{ID: "s_1", Owner: OpenSubject, CreatedAt: 1}
	if err := store.CreateSession(ctx, meta); err != nil {
		t.Fatal(err)
	}
	if err := store.BeginRun(ctx, journal.RunMeta{ID: "r_1", SessionID: "s_1", Owner: OpenSubject, CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	return &cadenceRig{t: t, h: h, store: store, meta: meta}
}

// tab is a watching socket without a writer (signal starts none).
func (r *cadenceRig) tab() *conn {
	c := writerless(&r.h.env)
	c.ctx, c.cancel = r.h.ctx, func() {}
	r.h.tracker.watch(c, []journal.SessionMeta{r.meta})
	return c
}

func (r *cadenceRig) emit(typ protocol.EventType, p any) {
	r.t.Helper()
	e, err := protocol.NewEvent("r_1", "s_1", typ, p)
	if err != nil {
		r.t.Fatal(err)
	}
	r.seq++
	if _, err := r.store.Append(context.Background(), e, "k"+strconv.Itoa(r.seq)); err != nil {
		r.t.Fatal(err)
	}
}

func (r *cadenceRig) token() {
	r.emit(protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m1", Text: "w "})
}

// take returns the status the tab was offered since the last take, if any.
func take(t *testing.T, c *conn) (protocol.SessionStatus, bool) {
	t.Helper()
	synctest.Wait()
	c.out.mu.Lock()
	var frame []byte
	ok := false
	if q := c.out.statuses; q != nil {
		var f statusFrame
		if f, ok = q.get("s_1"); ok {
			frame = f.appendTo(nil)
		}
		clear(q.items)
		q.items, q.head, q.index = q.items[:0], 0, nil
	}
	c.out.mu.Unlock()
	if !ok {
		return protocol.SessionStatus{}, false
	}
	var m protocol.StatusMessage
	if err := json.Unmarshal(frame, &m); err != nil || m.Session == nil {
		t.Fatalf("status frame %s: %v", frame, err)
	}
	return *m.Session, true
}

// A burst of progress-only changes (tokens every 10 ms for 3 s) reaches each
// watching tab as at most one status per session per StatusInterval, and
// the status after the burst carries its latest values.
func TestStatusCadence_ProgressAtMostOncePerInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = time.Second
		r := newCadenceRig(t, 0) // the default: one second
		tabs := []*conn{r.tab(), r.tab()}
		r.emit(protocol.EventRunStarted, protocol.RunStartedPayload{Message: "hi"})
		for _, c := range tabs {
			if st, ok := take(t, c); !ok || st.Status != protocol.StatusRunning {
				t.Fatalf("run.started: status %+v sent %v, want running at once", st, ok)
			}
		}
		start := time.Now()
		sent := make([][]time.Duration, len(tabs))
		last := make([]protocol.SessionStatus, len(tabs))
		const tokens = 300
		for i := 0; i < tokens; i++ {
			r.token()
			time.Sleep(10 * time.Millisecond)
			for j, c := range tabs {
				if st, ok := take(t, c); ok {
					sent[j] = append(sent[j], time.Since(start))
					last[j] = st
				}
			}
		}
		time.Sleep(interval + 200*time.Millisecond) // the last merged status falls due
		for j, c := range tabs {
			if st, ok := take(t, c); ok {
				sent[j] = append(sent[j], time.Since(start))
				last[j] = st
			}
			for k := 1; k < len(sent[j]); k++ {
				if gap := sent[j][k] - sent[j][k-1]; gap < interval {
					t.Fatalf("tab %d: progress statuses at %v: two %v apart, want ≥ %v", j, sent[j], gap, interval)
				}
			}
			if n := len(sent[j]); n < 2 || n > 5 {
				t.Fatalf("tab %d: %d progress statuses over a 3 s burst at %v, want 2–5 (one per second)", j, n, sent[j])
			}
			if st := last[j]; st.Tokens != tokens || st.LastSeq != tokens+1 {
				t.Fatalf("tab %d: last status has tokens %d, last_seq %d; want %d and %d", j, st.Tokens, st.LastSeq, tokens, tokens+1)
			}
		}
	})
}

// A change of meaning goes out at once, even right after a progress status
// and with progress still held back: a pending approval, then the terminal
// event, each with the latest progress.
func TestStatusCadence_MeaningGoesOutAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newCadenceRig(t, 0)
		c := r.tab()
		r.emit(protocol.EventRunStarted, protocol.RunStartedPayload{Message: "hi"})
		take(t, c)
		time.Sleep(2 * time.Second)
		r.token()
		time.Sleep(150 * time.Millisecond) // one flush tick: the (due) progress status leaves
		if st, ok := take(t, c); !ok || st.Tokens != 1 {
			t.Fatalf("progress status %+v sent %v, want tokens 1", st, ok)
		}
		r.token() // progress now held back for a second
		r.emit(protocol.EventApprovalReq, protocol.ApprovalRequestedPayload{ApprovalID: "a1", Summary: "rm -rf", Choices: []string{"once", "deny"}})
		st, ok := take(t, c) // no time passes
		if !ok || st.PendingApproval == nil || st.PendingApproval.ApprovalID != "a1" || st.Tokens != 2 {
			t.Fatalf("after approval.requested: status %+v sent %v, want pending a1 with tokens 2 at once", st, ok)
		}
		r.emit(protocol.EventApprovalRes, protocol.ApprovalResolvedPayload{ApprovalID: "a1", Choice: "once", Status: "resolved"})
		if st, ok := take(t, c); !ok || st.PendingApproval != nil {
			t.Fatalf("after approval.resolved: status %+v sent %v, want no pending approval at once", st, ok)
		}
		r.token()
		r.emit(protocol.EventDone, protocol.DonePayload{Status: "completed"})
		st, ok = take(t, c)
		if !ok || !st.Terminal || st.Tokens != 3 {
			t.Fatalf("after done: status %+v sent %v, want terminal with tokens 3 at once", st, ok)
		}
		time.Sleep(3 * time.Second)
		if st, ok := take(t, c); ok {
			t.Fatalf("a status %+v after the terminal one with nothing changed", st)
		}
	})
}
