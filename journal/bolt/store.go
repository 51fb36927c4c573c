package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/internal/localbus"
	"github.com/runhub/runhub/journal/internal/localstreams"
	"github.com/runhub/runhub/protocol"
)

// Store is a journal.Store in one bbolt file.
type Store struct {
	db   *bbolt.DB
	opts Options
	bus  *localbus.Bus

	// mu guards closed; senders on reqs and readers hold it shared, so
	// Close (exclusive) knows none is left when it stops the committer.
	mu     sync.RWMutex
	closed bool

	reqs      chan *request
	preparing atomic.Int64  // appends being prepared, soon to be queued (see gather)
	stop      chan struct{} // closed by Close: the committer drains and exits
	done      chan struct{} // closed by the committer when it has exited

	log    *segLog
	seed   maphash.Seed // of the key tables' fingerprints
	wedged error        // the committer's: the log could not be repaired after a failed write
	// compactDue (the committer's): a segment may be worth compacting.
	compactDue bool
	// backlog (the committer's): writes were queued when the last commit
	// finished, before its writers were answered (GroupCommit.Interval).
	backlog bool

	// idxMu guards index and its entries: the committer changes them
	// (merge), readers read them. A reader that reads records takes
	// log.mu (shared) first.
	idxMu sync.RWMutex
	index map[string]*runEntry // the active runs (endedindex.go)
	ended endedCache           // ended runs' entries read from bbolt or just ended

	recovered int // the records the open's recovery read

	streamHub localstreams.Hub // durable streams' change notifications (streams.go)
	overlay   streamOverlay    // durable streams' writes bbolt does not hold yet (streamoverlay.go)
}

var _ journal.Store = (*Store)(nil)

// ErrLocked is Open's error when another process holds the journal file
// (bbolt's exclusive file lock) for longer than Options.LockTimeout.
var ErrLocked = errors.New("journal/bolt: the journal file is locked by another process")

// Open opens (creating if needed) the journal file at path and starts its
// committer. The caller must Close the store.
func Open(path string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{
		Timeout:        opts.LockTimeout,
		NoSync:         opts.NoSync,
		FreelistType:   bbolt.FreelistMapType,
		NoFreelistSync: opts.NoSyncFreelist,
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s (waited %v for its lock)", ErrLocked, path, opts.LockTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("journal/bolt: open %s: %w", path, err)
	}
	s := &Store{
		db:   db,
		opts: opts,
		bus:  localbus.New(),
		reqs: make(chan *request, opts.GroupCommit.MaxBatch),
		stop: make(chan struct{}),
		done: make(chan struct{}),
		seed: maphash.MakeSeed(),
	}
	if err := s.openEvents(); err != nil {
		if s.log != nil {
			s.log.close()
		}
		db.Close()
		return nil, fmt.Errorf("journal/bolt: open %s: %w", path, err)
	}
	go s.commitLoop()
	return s, nil
}

// openEvents prepares bbolt's buckets, migrates a journal of the first
// layout, opens the event log, recovers the index (recover.go), moves
// a layout-2 file's stream data to the log (migrate_streams.go) and
// writes the index of ended runs of a file of an earlier layout
// (endedindex.go).
func (s *Store) openEvents() error {
	if err := s.db.Update(createBuckets); err != nil {
		return err
	}
	format, err := s.format()
	if err != nil {
		return err
	}
	switch format {
	case 1:
		if err := s.migrate(); err != nil {
			return fmt.Errorf("migrate to the segmented event log: %w", err)
		}
	case formatSegments, formatStreamLog, formatEndedIndex:
	default:
		return fmt.Errorf("journal/bolt: unknown layout %d (written by a newer runhub?)", format)
	}
	if s.log, err = openLog(EventsDir(s.db.Path()), s.opts.segmentBytes, s.opts.NoSync); err != nil {
		return err
	}
	if err := s.recover(format < formatEndedIndex); err != nil {
		return err
	}
	if format < formatStreamLog {
		if err := s.migrateStreams(); err != nil {
			return fmt.Errorf("move the durable streams' data to the event log: %w", err)
		}
	}
	if format < formatEndedIndex {
		if err := s.persistEndedRuns(); err != nil {
			return fmt.Errorf("write the index of ended runs: %w", err)
		}
	}
	if err := s.buildQueued(); err != nil {
		return fmt.Errorf("index the sessions with queued messages: %w", err)
	}
	if err := s.buildOwnerKeys(); err != nil {
		return fmt.Errorf("index the sessions' places in their owners' lists: %w", err)
	}
	s.compactDue = true
	return nil
}

// Path returns the path of the journal file (the sessions and runs; the
// events are in EventsDir(Path())).
func (s *Store) Path() string { return s.db.Path() }

// Close commits the writes already queued, stops the committer and
// delivery, and closes the file. Later calls return journal.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return journal.ErrClosed
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
	s.bus.Close()
	err := errors.Join(s.log.close(), s.db.Close())
	if err != nil {
		return fmt.Errorf("journal/bolt: close: %w", err)
	}
	return nil
}

// view runs fn in a read transaction unless the store is closed.
func (s *Store) view(fn func(tx *bbolt.Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return journal.ErrClosed
	}
	err := s.db.View(fn)
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return journal.ErrClosed
	}
	return err
}

// Append journals e; see journal.Log.
func (s *Store) Append(ctx context.Context, e protocol.Envelope, key string) (protocol.Envelope, error) {
	if len(key) > MaxKeyLen {
		return protocol.Envelope{}, protocol.Errorf(protocol.CodeTooLarge, "idempotency key: is %d bytes, limit %d", len(key), MaxKeyLen)
	}
	s.preparing.Add(1) // until submit queues it
	p, err := journal.Prepare(e, s.opts.Now())
	if err != nil {
		s.preparing.Add(-1)
		return protocol.Envelope{}, err
	}
	r := &request{kind: opAppend, event: p, key: key}
	if err := s.submit(ctx, r); err != nil {
		return protocol.Envelope{}, err
	}
	return r.stored, r.err
}

// Read returns up to limit events of the run after afterSeq; see journal.Log.
func (s *Store) Read(ctx context.Context, runID string, afterSeq uint64, limit int) ([]protocol.Envelope, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, journal.ErrClosed
	}
	s.log.mu.RLock() // no segment is dropped or remapped while we read
	defer s.log.mu.RUnlock()
	e, err := s.lookup(runID)
	if err != nil {
		return nil, err
	}
	if e == nil {
		// A batch that registers a run commits in bbolt before the index
		// learns of it: a reader that saw the session name the run in
		// between reads it as the run without events it is.
		known := false
		if err := s.db.View(func(tx *bbolt.Tx) error {
			known = tx.Bucket(bucketRuns).Get([]byte(runID)) != nil
			return nil
		}); err != nil {
			return nil, err
		}
		if known {
			return nil, nil
		}
		return nil, fmt.Errorf("run %q: %w", runID, journal.ErrNotFound)
	}
	s.idxMu.RLock()
	if limit <= 0 || afterSeq >= e.lastSeq {
		s.idxMu.RUnlock()
		return nil, nil
	}
	want := int(min(uint64(limit), e.lastSeq-afterSeq))
	offs := make([]uint64, 0, want)
	e.offs.each(afterSeq+1, func(_, off uint64) bool {
		offs = append(offs, off)
		return len(offs) < want
	})
	s.idxMu.RUnlock()
	out := make([]protocol.Envelope, 0, len(offs))
	d := rowDecoder{runID: runID}
	for i, off := range offs {
		seq := afterSeq + uint64(i) + 1
		body, _, err := s.log.body(off)
		if err != nil {
			return nil, fmt.Errorf("run %q seq %d: %w", runID, seq, err)
		}
		eb, err := parseEventBody(body)
		if err != nil {
			return nil, fmt.Errorf("run %q seq %d: %w", runID, seq, err)
		}
		ev, err := d.decode(seq, eb.row)
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// Run returns a run's meta; see journal.Log.
func (s *Store) Run(ctx context.Context, runID string) (journal.RunMeta, error) {
	var m journal.RunMeta
	err := s.view(func(tx *bbolt.Tx) error {
		e, err := s.entry(tx, runID)
		if err != nil {
			return err
		}
		m, err = loadRun(tx, runID, e)
		return err
	})
	return m, err
}

// CreateSession registers a session; see journal.Registry.
func (s *Store) CreateSession(ctx context.Context, m journal.SessionMeta) error {
	if err := protocol.ValidID(m.ID); err != nil {
		return fmt.Errorf("session id: %w", err)
	}
	if len(m.Owner) > MaxOwnerLen {
		return protocol.Errorf(protocol.CodeTooLarge, "owner: is %d bytes, limit %d", len(m.Owner), MaxOwnerLen)
	}
	if m.CreatedAt == 0 {
		m.CreatedAt = protocol.Timestamp(s.opts.Now())
	}
	m.Runs, m.ActiveRun = []string{}, ""
	journal.RedactSession(&m)
	r := &request{kind: opCreateSession, session: m}
	if err := s.submit(ctx, r); err != nil {
		return err
	}
	return r.err
}

// Session returns a session's meta; see journal.Registry.
func (s *Store) Session(ctx context.Context, id string) (journal.SessionMeta, error) {
	var m journal.SessionMeta
	err := s.view(func(tx *bbolt.Tx) error {
		var err error
		m, err = loadSession(tx, id)
		return err
	})
	return m, err
}

// Sessions lists an owner's sessions, oldest first; see journal.Registry.
func (s *Store) Sessions(ctx context.Context, owner string) ([]journal.SessionMeta, error) {
	out := []journal.SessionMeta{}
	err := s.view(func(tx *bbolt.Tx) error {
		prefix := ownerPrefix(owner)
		c := tx.Bucket(bucketOwners).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(prefix)+8; k, v = c.Next() {
			m, err := loadSession(tx, string(v))
			if err != nil {
				return err
			}
			out = append(out, m)
		}
		return nil
	})
	return out, err
}

// SessionsPage lists a page of an owner's sessions; see journal.Registry.
// The page starts after after's key in the owner index (owner_keys), and
// only the page's metas are read.
func (s *Store) SessionsPage(ctx context.Context, owner, after string, limit int) ([]journal.SessionMeta, bool, error) {
	out := []journal.SessionMeta{}
	more := false
	err := s.view(func(tx *bbolt.Tx) error {
		prefix := ownerPrefix(owner)
		c := tx.Bucket(bucketOwners).Cursor()
		ours := func(k []byte) bool { return k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(prefix)+8 }
		k, v := c.Seek(prefix)
		if after != "" {
			ak := ownedKey(tx.Bucket(bucketOwners), tx.Bucket(bucketOwnerKeys), owner, after)
			if ak == nil {
				return fmt.Errorf("%w: session %q of %q", journal.ErrNotFound, after, owner)
			}
			c.Seek(ak)
			k, v = c.Next()
		}
		for ; ours(k); k, v = c.Next() {
			if len(out) == limit {
				more = true
				break
			}
			m, err := loadSession(tx, string(v))
			if err != nil {
				return err
			}
			out = append(out, m)
		}
		return nil
	})
	return out, more, err
}

// BeginRun registers a run as its session's active run; see journal.Registry.
func (s *Store) BeginRun(ctx context.Context, m journal.RunMeta) error {
	r, err := s.prepareBegin(m)
	if err != nil {
		return err
	}
	if err := s.submit(ctx, r); err != nil {
		return err
	}
	return r.err
}

// prepareBegin checks and completes a run to register.
func (s *Store) prepareBegin(m journal.RunMeta) (*request, error) {
	if err := protocol.ValidID(m.ID); err != nil {
		return nil, fmt.Errorf("run id: %w", err)
	}
	if err := protocol.ValidID(m.SessionID); err != nil {
		return nil, fmt.Errorf("session id: %w", err)
	}
	if len(m.Request) > 0 {
		m.Request = journal.RedactJSON(m.Request)
		if len(m.Request) > protocol.MaxPayloadBytes {
			return nil, protocol.Errorf(protocol.CodeTooLarge, "request: is %d bytes, limit %d", len(m.Request), protocol.MaxPayloadBytes)
		}
		if !jsonValid(m.Request) {
			return nil, protocol.Errorf(protocol.CodeBadRequest, "request: is not valid JSON")
		}
	}
	if m.CreatedAt == 0 {
		m.CreatedAt = protocol.Timestamp(s.opts.Now())
	}
	m.LastSeq, m.Terminal, m.TerminalType, m.TerminalAt = 0, false, "", 0
	return &request{kind: opBeginRun, run: m}, nil
}

// BeginRunUpdate registers a run and changes its session's runtime-owned
// state in one transaction; see journal.Queues.
func (s *Store) BeginRunUpdate(ctx context.Context, m journal.RunMeta, fn func(*journal.SessionMeta) error) (journal.SessionMeta, error) {
	r, err := s.prepareBegin(m)
	if err != nil {
		return journal.SessionMeta{}, err
	}
	r.update = fn
	if err := s.submit(ctx, r); err != nil {
		return journal.SessionMeta{}, err
	}
	return r.sess, r.err
}

// DeleteSession removes a session without an active run and its runs; see
// journal.Registry.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	r := &request{kind: opDeleteSession, session: journal.SessionMeta{ID: id}}
	if err := s.submit(ctx, r); err != nil {
		return err
	}
	return r.err
}

// ActiveRuns lists every run without a terminal event; see journal.Registry.
func (s *Store) ActiveRuns(ctx context.Context) ([]journal.RunMeta, error) {
	out := []journal.RunMeta{}
	err := s.view(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketActive).ForEach(func(k, _ []byte) error {
			e, err := s.entry(tx, string(k))
			if err != nil {
				return err
			}
			m, err := loadRun(tx, string(k), e)
			if err != nil {
				return err
			}
			if !m.Terminal { // ended this instant: the index is ahead of this view
				out = append(out, m)
			}
			return nil
		})
	})
	return out, err
}

// trimChunk bounds the runs one Trim transaction deletes, so a large trim
// does not hold appends back for long.
const trimChunk = 256

// Trim deletes terminal runs that ended before before; see
// journal.Registry.
func (s *Store) Trim(ctx context.Context, before time.Time) (int, error) {
	total := 0
	for {
		r := &request{kind: opTrim, before: protocol.Timestamp(before), limit: trimChunk}
		if err := s.submit(ctx, r); err != nil {
			return total, err
		}
		if r.err != nil {
			return total, r.err
		}
		total += r.trimmed
		if r.trimmed < trimChunk {
			return total, nil
		}
	}
}

// SubscribeRun calls fn with every event appended to runID from now on;
// see journal.Bus.
func (s *Store) SubscribeRun(runID string, fn func(protocol.Envelope)) (cancel func()) {
	return s.bus.SubscribeRun(runID, fn)
}

// SubscribeFeed calls fn with every event of every run from now on; see
// journal.Bus.
func (s *Store) SubscribeFeed(fn func(protocol.Envelope)) (cancel func()) {
	return s.bus.SubscribeFeed(fn)
}

// SubscribeInterest subscribes fn to the whole feed (it is in process);
// see journal.Bus.
func (s *Store) SubscribeInterest(fn func(protocol.Envelope)) journal.Interest {
	return journal.WholeFeed{CancelFunc: s.bus.SubscribeFeed(fn)}
}
