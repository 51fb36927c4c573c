package bolt

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// opKind names a write.
type opKind uint8

const (
	opAppend opKind = iota
	opCreateSession
	opBeginRun
	opTrim
	opDeleteSession
	opStreamCommit // a durable stream's commit (streamrec.go)
	opStreamDrop
)

// request is one write waiting for the committer. The committer fills the
// results and closes done; the writer reads them only after done.
type request struct {
	kind opKind

	event   protocol.Envelope   // opAppend: prepared, unsequenced
	key     string              // opAppend: idempotency key or ""
	session journal.SessionMeta // opCreateSession; opDeleteSession: its ID
	run     journal.RunMeta
	update  func(*journal.SessionMeta) error // opBeginRun: BeginRunUpdate's fn, or nil
	before  float64                          // opTrim: cutoff (created_at form)
	limit   int                              // opTrim: most runs to delete
	stream  *streamOp                        // opStreamCommit, opStreamDrop

	stored  protocol.Envelope   // opAppend: the stored (or existing) event
	fresh   bool                // opAppend: stored was written by this request
	trimmed int                 // opTrim: runs deleted
	sess    journal.SessionMeta // opBeginRun with update: the session as written
	err     error

	done chan struct{}
}

// maxBatchBytes bounds the durable-stream data one batch takes (a batch
// that reaches it commits; a larger single write commits alone).
const maxBatchBytes = 16 << 20

// size is the stream data r writes to the log (run events are bounded by
// MaxBatch alone: journal.Prepare bounds each).
func (r *request) size() int {
	if r.stream == nil {
		return 0
	}
	return r.stream.size()
}

// batchBytes is the stream data of batch.
func batchBytes(batch []*request) int {
	n := 0
	for _, r := range batch {
		n += r.size()
	}
	return n
}

// submit queues r and waits for its result. It returns ErrClosed when the
// store is closed and ctx.Err() when ctx ends first; the write may still
// commit in that case (retry with an idempotency key).
func (s *Store) submit(ctx context.Context, r *request) error {
	r.done = make(chan struct{})
	if err := ctx.Err(); err != nil { // ended already: never queued
		if r.kind == opAppend {
			s.preparing.Add(-1)
		}
		return err
	}
	s.mu.RLock()
	if r.kind == opAppend {
		s.preparing.Add(-1) // from here on the request is queued, not on its way
	}
	if s.closed {
		s.mu.RUnlock()
		return journal.ErrClosed
	}
	select {
	case s.reqs <- r:
	case <-ctx.Done():
		s.mu.RUnlock()
		return ctx.Err()
	}
	s.mu.RUnlock()
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		select {
		case <-r.done: // committed as ctx ended: report what happened
			return nil
		default:
			return ctx.Err()
		}
	}
}

// commitLoop is the committer: it gathers queued writes into batches and
// commits each in one transaction until Close, then commits what is left.
func (s *Store) commitLoop() {
	defer close(s.done)
	max := s.opts.GroupCommit.MaxBatch
	w := newWriter(s)
	w.outbox = s.opts.Outbox
	batch := make([]*request, 0, max)
	var timer, syncTimer *time.Timer
	var syncDue <-chan time.Time // armed while the log holds unsynced batches
	var last time.Time           // when the previous commit started
	paced := false               // writes queued while the previous commit ran
	for {
		select {
		case r := <-s.reqs:
			batch = append(batch[:0], r)
		case <-syncDue:
			syncDue = nil
			s.syncLog()
			continue
		case <-s.stop:
			s.drain(w, batch[:0])
			s.syncLog()
			if s.wedged == nil {
				_ = s.checkpointStreams() // a clean close leaves none to replay
			}
			return
		}
		if paced {
			batch = s.pace(batch, &timer, last)
		}
		batch = s.gather(batch, &timer)
		if s.opts.GroupCommit.Interval > 0 {
			last = time.Now()
		}
		s.commit(w, batch)
		// Writes that queued while it ran come from writers other than
		// the batch's (those were waiting for it): the next batch waits
		// for the interval, to take more of them. When none did, the
		// writers are the ones just answered, each about to append
		// again: waiting would only slow them down.
		paced = s.opts.GroupCommit.Interval > 0 && s.backlog
		if s.log.dirty && syncDue == nil {
			if syncTimer == nil {
				syncTimer = time.NewTimer(s.opts.SyncEvery)
			} else {
				syncTimer.Reset(s.opts.SyncEvery)
			}
			syncDue = syncTimer.C
		}
		if s.wedged == nil && s.overlay.due(time.Now(), s.opts.checkpoint.entries, s.opts.checkpoint.every) {
			// A failure leaves the overlay as it is, for the next to try.
			_ = s.checkpointStreams()
		}
		if s.compactDue && s.wedged == nil {
			// One segment per batch, so appends wait for one at most. A
			// failure leaves the segment as it was, for the next deletion
			// to try again.
			more, err := s.compact()
			s.compactDue = more && err == nil
		}
	}
}

// pace holds batch until GroupCommit.Interval has passed since the
// previous commit started (last), adding the writes that come meanwhile,
// up to MaxBatch. A batch that fills up, or Close, ends the wait. The
// committer paces a batch only when writes queued during the previous
// commit.
func (s *Store) pace(batch []*request, timer **time.Timer, last time.Time) []*request {
	wait := s.opts.GroupCommit.Interval - time.Since(last)
	if s.opts.GroupCommit.Interval <= 0 || wait <= 0 {
		return batch
	}
	if *timer == nil {
		*timer = time.NewTimer(wait)
	} else {
		(*timer).Reset(wait)
	}
	defer (*timer).Stop()
	size := batchBytes(batch)
	for len(batch) < s.opts.GroupCommit.MaxBatch && size < maxBatchBytes {
		select {
		case r := <-s.reqs:
			batch = append(batch, r)
			size += r.size()
		case <-(*timer).C:
			return batch
		case <-s.stop:
			return batch
		}
	}
	return batch
}

// gather adds waiting writes to batch, up to MaxBatch. When the queue runs
// dry while appends are still being prepared on their callers' goroutines,
// it waits for them, up to MaxWait: they will be there in microseconds, and
// committing them with this batch saves them a commit (an fsync) of their
// own. Nobody on the way, no wait.
func (s *Store) gather(batch []*request, timer **time.Timer) []*request {
	max, wait := s.opts.GroupCommit.MaxBatch, s.opts.GroupCommit.MaxWait
	var deadline <-chan time.Time
	size := batchBytes(batch)
	for len(batch) < max && size < maxBatchBytes {
		select {
		case r := <-s.reqs:
			batch = append(batch, r)
			size += r.size()
			continue
		default:
		}
		if wait <= 0 || s.preparing.Load() == 0 {
			break
		}
		if deadline == nil {
			if *timer == nil {
				*timer = time.NewTimer(wait)
			} else {
				(*timer).Reset(wait)
			}
			deadline = (*timer).C
		}
		select {
		case r := <-s.reqs:
			batch = append(batch, r)
			size += r.size()
			continue
		case <-deadline:
			return batch
		case <-s.stop:
		}
		break
	}
	if deadline != nil {
		(*timer).Stop()
	}
	return batch
}

// drain commits the writes queued before Close. Close holds no senders
// back any more, so the queue only shrinks.
func (s *Store) drain(w *writer, batch []*request) {
	size := batchBytes(batch)
	for {
		select {
		case r := <-s.reqs:
			batch = append(batch, r)
			if size += r.size(); len(batch) < s.opts.GroupCommit.MaxBatch && size < maxBatchBytes {
				continue
			}
		default:
		}
		if len(batch) == 0 {
			return
		}
		s.commit(w, batch)
		batch, size = batch[:0], 0
	}
}

// commit applies batch, publishes the new events and answers the
// writers. A batch that fails is retried one write at a time, so one bad
// write cannot fail its neighbours.
func (s *Store) commit(w *writer, batch []*request) {
	err := s.wedged
	if err == nil {
		err = s.commitBatch(w, batch)
	}
	// Before any writer of the batch is answered (and appends again).
	s.backlog = len(s.reqs) > 0
	if err != nil {
		if len(batch) > 1 && s.wedged == nil {
			for _, r := range batch {
				s.commit(w, []*request{r})
			}
			return
		}
		for _, r := range batch {
			r.stored, r.fresh, r.trimmed = protocol.Envelope{}, false, 0
			r.err = fmt.Errorf("journal/bolt: commit: %w", err)
			close(r.done)
		}
		return
	}
	fresh := w.published[:0]
	for _, r := range batch {
		switch {
		case r.fresh:
			fresh = append(fresh, r.stored)
		case r.err != nil:
		case r.kind == opCreateSession:
			fresh = append(fresh, journal.SessionChangedRecord(r.session.ID))
		case r.kind == opBeginRun:
			fresh = append(fresh, journal.SessionChangedRecord(r.run.SessionID))
		case r.kind == opDeleteSession:
			fresh = append(fresh, journal.SessionChangedRecord(r.session.ID))
		}
	}
	s.bus.Publish(fresh)
	clear(fresh)
	w.published = fresh[:0]
	for _, r := range batch {
		close(r.done)
	}
}

// commitBatch applies batch: its records in one write and one fdatasync
// of the log; then, when it changed bbolt, bbolt's transaction, which
// records the log's new end. Writers are answered only after both, so an
// acknowledged write is durable in both; a crash between them leaves a
// marked batch past bbolt's log end, which recovery cuts off (recover.go).
// Then the batch's runs are merged into the index.
func (s *Store) commitBatch(w *writer, batch []*request) (err error) {
	w.begin()
	defer func() {
		if err != nil && w.tx != nil {
			w.tx.Rollback()
		}
		w.end()
	}()
	for _, r := range batch {
		if err := w.apply(r); err != nil {
			return err
		}
	}
	skip := len(markerRecord)
	size := uint64(len(w.buf)-skip) + w.extBytes() // the records, stream data included
	if w.tx != nil && size > 0 {
		skip, w.marked = 0, true // records and bbolt: mark the batch
		size += uint64(len(markerRecord))
	}
	if size > 0 {
		if w.start, err = s.log.reserve(size); err != nil {
			return err
		}
	} else {
		w.start = s.log.end()
	}
	if w.tx != nil {
		if err := w.flush(w.start + size); err != nil {
			return err
		}
	}
	from := s.log.active().size.Load()
	if size > 0 {
		write := s.log.write
		if s.opts.SyncEvery > 0 && w.tx == nil && len(w.streamMetas) == 0 {
			// Events only: synced within SyncEvery. A durable stream's
			// append is acknowledged once fdatasynced, whatever SyncEvery.
			write = s.log.writeLazy
		}
		wedge, err := write(w.parts(skip)...)
		if wedge != nil {
			s.wedged = fmt.Errorf("%w: the event log cannot be repaired until reopened: %v", journal.ErrUnavailable, wedge)
		}
		if err != nil {
			return fmt.Errorf("journal/bolt: write the event log: %w", err)
		}
	}
	if w.tx != nil {
		// bbolt is to record the log's end: what lies before it must be
		// durable first (it is, unless lazy batches preceded this one
		// and it wrote no record of its own).
		if err := s.log.sync(); err != nil {
			// The lazy batches may be lost: as syncLog, take no more.
			s.wedged = fmt.Errorf("%w: %v", journal.ErrUnavailable, err)
			return err
		}
		if err := w.tx.Commit(); err != nil {
			w.tx = nil // rolled back by the failed commit
			if size > 0 {
				if cerr := s.log.cut(from); cerr != nil {
					s.wedged = fmt.Errorf("%w: the event log cannot be repaired until reopened: %v", journal.ErrUnavailable, cerr)
				}
			}
			return err
		}
	}
	s.merge(w)
	return nil
}

// syncLog makes the lazily written batches durable (SyncEvery). An
// fdatasync that fails may have lost them: the store takes no more writes
// until it is reopened (recovery then cuts what did not reach the disk).
func (s *Store) syncLog() {
	if s.wedged != nil {
		return
	}
	if err := s.log.sync(); err != nil {
		s.wedged = fmt.Errorf("%w: %v", journal.ErrUnavailable, err)
	}
}

func jsonValid(b []byte) bool { return json.Valid(b) }
