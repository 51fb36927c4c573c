package hub

import (
	"encoding/json"
	"slices"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// checkCursor validates a focus cursor against the session; a bad one is
// answered with bad_cursor and the replay falls back to the latest run.
func (c *conn) checkCursor(sid, raw string, meta *journal.SessionMeta) (protocol.Cursor, journal.RunMeta, bool) {
	var run journal.RunMeta
	cur, err := protocol.ParseCursor(raw)
	if err != nil {
		c.sendError(protocol.CodeBadCursor, errMessage(err)+"; replaying the latest run", "focus")
		return cur, run, false
	}
	if !slices.Contains(meta.Runs, cur.RunID) {
		c.sendError(protocol.CodeBadCursor, "cursor "+raw+" is not of session "+sid+"; replaying the latest run", "focus")
		return cur, run, false
	}
	run, err = c.store.Run(c.ctx, cur.RunID)
	if err != nil || cur.Seq > run.LastSeq {
		c.sendError(protocol.CodeBadCursor, "cursor "+raw+" is past the run's last event; replaying the latest run", "focus")
		return cur, run, false
	}
	return cur, run, true
}

// offerEvent is called by the router with a live event of a focused session
// and its encoded frame (shared by every socket). It reports whether the
// event was queued to the socket (the router counts those).
func (c *conn) offerEvent(e *protocol.Envelope, frame []byte) bool {
	o := &c.out
	o.mu.Lock()
	defer o.mu.Unlock()
	f := &o.focus
	if f.sid != e.SessionID || f.lagging || f.resolve || o.closing {
		return false
	}
	if e.RunID != f.runID {
		if !f.runDone || e.Seq != 1 {
			f.lagging = true // a run we have not finished, or a gap: read the journal
			c.signal()
			return false
		}
		f.runID, f.next, f.runDone = e.RunID, 1, false
	}
	// The live events of a run share their ids' bytes: holding the same
	// strings makes the next comparisons a pointer check, not a memcmp.
	f.sid, f.runID = e.SessionID, e.RunID
	switch {
	case e.Seq < f.next:
		return false // already sent
	case e.Seq > f.next || len(o.events) >= c.cfg.QueueEvents:
		if e.Seq == f.next {
			f.slow = true
			c.metrics.SlowConsumerDropped()
		}
		f.lagging = true // a gap, or the tab is not keeping up: drop, catch up later
		c.signal()
		return false
	}
	o.events = append(o.events, frame)
	f.next++
	f.runDone = e.Terminal
	c.signal()
	return true
}

// kick makes a socket focused on sid re-read the journal (the router calls
// it when the session's tailed run changes).
func (c *conn) kick(sid string) {
	c.out.mu.Lock()
	if c.out.focus.sid == sid {
		c.out.focus.lagging = true
	}
	c.out.mu.Unlock()
	c.signal()
}

func (c *conn) needsCatchUp() bool {
	c.out.mu.Lock()
	defer c.out.mu.Unlock()
	f := &c.out.focus
	return f.sid != "" && (f.lagging || f.verify || f.resolve) && !c.out.closing
}

// catchUp does one step of reading the journal for the focus: resolve the
// latest run, move to a later run, or read one page. It is called by the
// writer only when the event queue is empty.
func (c *conn) catchUp() error {
	o := &c.out
	o.mu.Lock()
	f := o.focus
	o.mu.Unlock()
	if f.resolve || f.runDone || f.runID == "" {
		meta, err := c.store.Session(c.ctx, f.sid)
		if err != nil {
			return err
		}
		target := ""
		if f.resolve {
			target = meta.LatestRun()
		} else if i := slices.Index(meta.Runs, f.runID); f.runID == "" || i >= 0 {
			if f.runID == "" && len(meta.Runs) > 0 {
				target = meta.Runs[0]
			} else if i >= 0 && i+1 < len(meta.Runs) {
				target = meta.Runs[i+1]
			}
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		cur := &o.focus
		if cur.gen != f.gen || cur.runID != f.runID || cur.next != f.next {
			return nil // focus moved meanwhile; look again
		}
		switch {
		case f.resolve:
			cur.resolve = false
			cur.runID, cur.next, cur.runDone = target, 1, target == ""
		case target != "":
			cur.runID, cur.next, cur.runDone = target, 1, false
		default:
			c.caughtUp(cur)
		}
		return nil
	}
	page := c.replayPage(f.compact)
	events, err := c.store.Read(c.ctx, f.runID, f.next-1, page)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	cur := &o.focus
	if cur.gen != f.gen || cur.runID != f.runID {
		return nil
	}
	for i := 0; i < len(events); i++ {
		e := &events[i]
		if e.Seq != cur.next {
			continue
		}
		if len(o.events) >= c.cfg.QueueEvents {
			cur.lagging = true
			return nil
		}
		frame, n, err := c.replayFrame(events[i:], f.compact)
		if err != nil {
			return err
		}
		o.events = append(o.events, frame)
		for range n {
			c.metrics.EventDelivered(e.Type, true)
		}
		i += n - 1
		e = &events[i]
		cur.next = e.Seq + 1
		cur.runDone = e.Terminal
		if cur.replayPending {
			cur.replayed += n
		}
	}
	if len(events) < page && !cur.runDone {
		c.caughtUp(cur)
	}
	return nil
}

// caughtUp ends a catch-up pass: the first pass after lagging turns live
// delivery back on and asks for one verifying read (an event journaled
// before live delivery resumed but published while lagging would otherwise
// be lost); the verifying pass ends catch-up. The replay marker goes out the
// first time. Called with out.mu held.
func (c *conn) caughtUp(f *focusState) {
	if f.lagging {
		if f.slow {
			f.slow = false
			c.metrics.SlowConsumerCaughtUp()
		}
		f.lagging, f.verify = false, true
	} else {
		f.verify = false
	}
	defer c.out.checkSettled()
	if f.replayPending {
		f.replayPending = false
		cursor := ""
		if f.runID != "" && f.next > 1 {
			cursor = protocol.EventID(f.runID, f.next-1)
		}
		b, _ := json.Marshal(protocol.Replayed{Type: protocol.MsgReplayed, SessionID: f.sid, Cursor: cursor, Count: f.replayed})
		c.out.events = append(c.out.events, b)
	}
}

// settle makes the socket read its focus from the journal to the end once
// more, and returns a channel closed when that pass has ended and every
// event it queued has been taken for writing (at once for a socket with
// no focus). Shutdown settles every socket before the goaway: the events
// the drain ended its runs with were journaled a moment before, and a
// close queued ahead of their live delivery would drop them (a closing
// socket sends no event).
func (c *conn) settle() <-chan struct{} {
	o := &c.out
	o.mu.Lock()
	ch := make(chan struct{})
	if o.focus.sid == "" || o.closing {
		close(ch)
		o.mu.Unlock()
		return ch
	}
	if o.settled != nil {
		close(o.settled) // an earlier settle's waiter gives way to this one
	}
	o.settled = ch
	if !o.focus.lagging && !o.focus.resolve {
		o.focus.verify = true
	}
	o.mu.Unlock()
	c.signal()
	return ch
}
