package executor_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/mem"
	"github.com/runhub/runhub/protocol"
)

// editOnRead changes the session's queue right after the executor's first
// read of it, the way a queue edit landing between a drain's read and its
// pop would.
type editOnRead struct {
	*mem.Store
	once sync.Once
	edit func(*journal.SessionMeta) error
}

func (s *editOnRead) Session(ctx context.Context, id string) (journal.SessionMeta, error) {
	m, err := s.Store.Session(ctx, id)
	if err == nil && len(m.Queue) > 0 {
		s.once.Do(func() {
			if _, uerr := s.Store.UpdateSession(ctx, id, s.edit); uerr != nil {
				panic(uerr)
			}
		})
	}
	return m, err
}

// A queue edited between a drain's read and its pop neither runs the old
// text nor strands the queue on an idle session.
func TestDrain_QueueEditedMeanwhile(t *testing.T) {
	cases := []struct {
		name string
		edit func(*journal.SessionMeta) error
		want string // the message the started run carries
		left int    // messages still queued after it
	}{
		{"head edited", func(m *journal.SessionMeta) error {
			m.Queue = slices.Clone(m.Queue)
			m.Queue[0].Message = "one, edited"
			return nil
		}, "one, edited", 1},
		{"head removed", func(m *journal.SessionMeta) error {
			m.Queue = slices.Clone(m.Queue[1:])
			return nil
		}, "two", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			base := mem.New(mem.Options{})
			defer base.Close()
			sid := adapter.NewID("s_")
			if err := base.CreateSession(ctx, journal.SessionMeta{ID: sid, Owner: "local", CreatedAt: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := base.UpdateSession(ctx, sid, func(m *journal.SessionMeta) error {
				m.Queue = []journal.QueuedMessage{{ID: "q1", Message: "one", QueuedAt: 1}, {ID: "q2", Message: "two", QueuedAt: 2}}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			store := &editOnRead{Store: base, edit: tc.edit}
			d := blocking{started: make(chan struct{})}
			rt := executor.New(store, executor.Options{Drivers: map[string]driver.Driver{"block": d}, DefaultDriver: "block"})
			defer rt.Close()

			if !rt.Drain(ctx, sid) {
				t.Fatal("Drain started no run; the queue is stranded on an idle session")
			}
			<-d.started
			meta, err := base.Session(ctx, sid)
			if err != nil {
				t.Fatal(err)
			}
			if meta.ActiveRun == "" || len(meta.Queue) != tc.left {
				t.Fatalf("after the drain: active run %q, queue %+v; want a run and %d queued", meta.ActiveRun, meta.Queue, tc.left)
			}
			rm, err := base.Run(ctx, meta.ActiveRun)
			if err != nil {
				t.Fatal(err)
			}
			var req protocol.StartRunRequest
			if err := json.Unmarshal(rm.Request, &req); err != nil {
				t.Fatal(err)
			}
			if req.Message != tc.want {
				t.Fatalf("the run carries %q; want %q", req.Message, tc.want)
			}
		})
	}
}
