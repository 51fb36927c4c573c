package bolt

import (
	"errors"
	"sync"

	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/runhub/runhub/journal"
)

// streamCommitter groups concurrent durable-stream commits into one bbolt
// transaction (one fsync) without a goroutine of its own: the first
// caller that finds none running commits at once (a lone writer never
// waits); callers that arrive meanwhile queue, and the next of them leads
// the next transaction with all of them. Each commit is a function of the
// transaction that either fails before it writes anything (a lost
// compare-and-set or a stream gone: answered alone, answersAlone) or
// writes; any other failure rolls the transaction back and is every
// caller's answer.
type streamCommitter struct {
	mu      sync.Mutex
	running bool
	queue   []*streamCommit
}

type streamCommit struct {
	fn   func(tx *bbolt.Tx) error
	done chan error    // the commit's answer
	lead chan struct{} // closed when this one is to lead the next transaction
}

// answersAlone reports whether a commit's error is its own answer: one a
// commit returns before it writes anything (a lost compare-and-set, a
// stream gone), which leaves the transaction to the others.
func answersAlone(err error) bool {
	return errors.Is(err, journal.ErrConflict) || errors.Is(err, journal.ErrNotFound)
}

// do runs fn in a transaction of db, with whatever else is queued.
func (c *streamCommitter) do(db *bbolt.DB, fn func(tx *bbolt.Tx) error) error {
	me := &streamCommit{fn: fn, done: make(chan error, 1), lead: make(chan struct{})}
	c.mu.Lock()
	c.queue = append(c.queue, me)
	if c.running {
		c.mu.Unlock()
		select {
		case err := <-me.done:
			return err
		case <-me.lead:
		}
		c.mu.Lock()
	}
	c.running = true
	batch := c.queue
	c.queue = nil
	c.mu.Unlock()

	c.commit(db, batch)

	c.mu.Lock()
	if len(c.queue) > 0 {
		close(c.queue[0].lead) // it takes over, with everything queued by then
	} else {
		c.running = false
	}
	c.mu.Unlock()
	return <-me.done
}

// commit runs batch in one transaction and answers each.
func (c *streamCommitter) commit(db *bbolt.DB, batch []*streamCommit) {
	errs := make([]error, len(batch))
	err := db.Update(func(tx *bbolt.Tx) error {
		for i, sc := range batch {
			errs[i] = sc.fn(tx)
			if errs[i] != nil && !answersAlone(errs[i]) {
				return errs[i]
			}
		}
		return nil
	})
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		err = journal.ErrClosed
	}
	for i, sc := range batch {
		if err != nil {
			sc.done <- err
		} else {
			sc.done <- errs[i]
		}
	}
}
