// Package bolt is runhub's embedded journal backend: a journal.Store in a
// bbolt file and an append-only event log beside it, with an in-process
// bus. It is the default deployment's journal (one hub process,
// `./data/journal.db` and `./data/journal.db.events/`).
//
// # Where things are
//
// Events, and durable streams' records, are in the event log: segment
// files (seglog.go) of framed records (record.go: length, CRC-32C, body),
// appended and never rewritten in place. Everything else is in bbolt: sessions, runs' fixed meta, each
// run's head (its session, birth offset and terminal state), the active
// and ended indexes, the outbox, the log's committed end. An active run's
// last seq, the log offsets of its events and its idempotency keys are in
// memory (runindex.go), rebuilt on open by reading the log from the
// earliest active run's birth (recover.go): an offset costs a few bytes
// (delta-encoded), a key 11 to 21 (a fingerprint and its seq in an
// open-addressing table; the key itself is in the event's record, which
// confirms a match). An ended run's offsets are written to bbolt by the
// batch that ends it, with its records' count in each segment
// (endedindex.go), and read back when the run is first read, into a
// bounded cache: an open costs the same however many ended runs the
// journal keeps. An ended run's keys are found by reading its records (a
// retry against an ended run is rare).
//
// # Writes: group commit, two stores, one order
//
// Every write (Append, CreateSession, BeginRun, Trim, DeleteSession) is
// queued to one committer goroutine owned by the Store. The committer
// takes whatever is waiting (up to GroupCommit.MaxBatch) and applies it as
// one batch: seqs, the terminal check and idempotency keys against the
// index, the batch's events encoded into one buffer. A batch of plain
// appends (a token, a tool call…: no change to bbolt) is one write and
// one fdatasync of the log, whatever the number of runs it spans; then its
// events are merged into the index, handed to subscribers in seq order,
// and the writers are answered.
//
// With GroupCommit.Interval the committer paces itself: when writes
// queued while a commit ran (writers other than the batch's, which were
// waiting for it), the next commit starts Interval after the previous one
// started, taking what queued meanwhile. Many runs streaming at once then
// cost about one fdatasync per Interval (a commit after one that left
// nothing queued starts at once); writers that each wait for
// their write leave nothing queued and are not held back.
//
// A batch that also changes bbolt — a session or run registered, a run's
// terminal event (its head, the active and ended indexes, the session's
// active run), a durable stream's drop, an outbox entry (Options.Outbox: a notable event's, which
// must exist if and only if the event does), a deletion — applies those
// changes in ONE bbolt read-write transaction opened for the batch. Its
// records start with a marker record, and the order is:
//
//  1. the log write and fdatasync (marker and records);
//  2. the bbolt commit, which also records the log's new end (log_end);
//  3. the index merge, delivery, the answers.
//
// A crash between 1 and 2 leaves a marked batch at or past bbolt's
// log_end: recovery cuts the log there, and the store is as if the batch
// never ran — none of its writers was answered. bbolt is the commit point
// of every change that spans both stores: an event and the metadata it
// changes are committed together or not at all, which is the atomicity
// the store had when events were in bbolt too. Only the last batch can be
// in doubt (the committer does not start the next one before 2). Plain
// batches need no marker: written and synced, they are committed.
//
// With Options.SyncEvery a plain batch is answered once written, and the
// committer fdatasyncs the log within SyncEvery (and before any batch that
// changes bbolt, which records a log end that must be durable, before a
// segment roll and on Close). A crash of the process loses nothing
// answered: the bytes are in the file. A crash of the machine can lose the
// unsynced plain batches; recovery finds them torn or missing past the
// last synced byte and cuts them, as any torn tail.
//
// The active segment's file runs up to 1 MiB ahead of its records with
// zeros, written before the records that overwrite them, so that a
// batch's fdatasync changes no file length and flushes data alone
// (without a file-system journal commit); a segment loses its zeros when
// the next one starts and on Close.
//
// A torn tail (a crash during 1, or a write cut short) fails its record's
// length or CRC, as does a zeroed tail (a length of zero is no record):
// recovery cuts the log at the last whole record. A record
// of a run bbolt does not know (deleted, or never committed), or from
// before the run's birth offset (an id deleted and registered again), is
// dead and skipped. bbolt runs one read-write transaction at a time, so a
// batch's transaction and UpdateSession never interleave.
//
// When a write fails, the batch is cut from the log (truncated back) and
// its writes are retried one at a time, so one bad write cannot fail its
// neighbours. If even the cut fails, the store refuses writes
// (journal.ErrUnavailable) until it is reopened, when recovery repairs
// the log.
//
// Appends are validated, redacted and bounded (journal.Prepare) on the
// caller's goroutine before they are queued, so that work runs in parallel
// and a refused event never reaches the log.
//
// # Reads
//
// Read takes the run's offsets from the index and reads the records
// through a read-only mapping of the segments (ReadAt where there is no
// mmap). Run, Session, Sessions and ActiveRuns read bbolt in read
// transactions and the run's changing state from the index. All run on
// the caller's goroutine, concurrently with each other and with the
// committer, and see only committed data.
//
// # Space
//
// A segment file (DefaultSegmentBytes) is dropped once no live record is
// left in it: its runs were trimmed or deleted. A sealed segment less than
// a quarter live (a long-lived run holding on to a segment whose other
// runs are gone) is compacted: its live records are copied to the end of
// the log and it is dropped (compact.go). The log so stays within a few
// times its live bytes.
//
// # Layout (bbolt)
//
//	sessions  session id → SessionMeta JSON
//	owners    uvarint(len owner) owner, be64(creation order) → session id
//	runs      run id → RunMeta JSON, its fixed part (id, session, owner, created_at, request)
//	heads     run id → born offset, terminal state, session (layout.go)
//	active    run id → ∅, every run without a terminal event
//	ended     be64(terminal_at µs) run id → ∅, terminal runs by age, for Trim
//	outbox    be64(n) → journal.OutboxEntry JSON: the notable events, written in
//	          the transaction of the batch that appends them (outbox.go)
//	ended_offsets  run id → uvarint(last seq), the zigzag-varint deltas of
//	          its events' offsets: every ended run's (endedindex.go)
//	segment_live  be64(segment base) → uvarint(records), uvarint(bytes):
//	          the ended runs' records each segment holds
//	meta      format → be64(4); log_end → be64(the log's committed end)
//	streams   a durable stream's name → journal.StreamMeta JSON (streams.go)
//	stream_index  name, 0, generation, 0, be64(index) → be64(end),
//	          be32(JSON message count), be64(the record's log offset),
//	          be32(its length)
//
// A durable stream's commit is a plain batch too: its records and a meta
// record in the log, the meta and index entries in memory (the overlay)
// until the next transaction of a batch, or a checkpoint, writes them to
// bbolt; recovery replays those past log_end (streamoverlay.go).
//
// A durable stream's records count as live in their segments as long as
// the stream index points at them (recovery counts them from the index);
// compaction copies them forward like events, and points the index at the
// copies in a transaction after they are durable (compact.go).
//
// A file of the first layout (format 1: events in bbolt buckets log, index
// and keys) is migrated by Open, in one transaction (migrate.go). A file
// of layout 2 (streams' data in bbolt's stream_records bucket) has its
// streams' records moved to the log by Open, a chunk at a time
// (migrate_streams.go). A file of layout 2 or 3 is recovered in full
// once, and its ended runs' index written (endedindex.go).
//
// # Concurrency
//
// All methods are safe for concurrent use. Subscriber callbacks run on the
// committer goroutine after the commit and before the writers are answered:
// they must not block, must not call back into the store (cancel included)
// and must not modify the event's payload, which is shared.
package bolt
