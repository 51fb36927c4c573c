// Package bolt is runhub's embedded journal backend: a journal.Store in one
// bbolt file, with an in-process bus. It is the default deployment's journal
// (one hub process, `./data/journal.db`).
//
// # Writes: group commit
//
// Every write (Append, CreateSession, BeginRun, Trim, DeleteSession) is queued to one
// committer goroutine owned by the Store. The committer takes whatever is
// waiting (up to GroupCommit.MaxBatch), applies it in ONE bbolt read-write
// transaction, one commit (bbolt's two fdatasyncs) for the whole batch,
// then hands the committed events to subscribers in seq order, then
// answers each writer.
// Seq assignment, the terminal check, idempotency keys, the session's active
// run and the indexes all change in that same transaction, so they are
// atomic with the event and with each other. bbolt runs one read-write
// transaction at a time, so the committer's batches and UpdateSession never
// interleave.
//
// Appends are validated, redacted and bounded (journal.Prepare) on the
// caller's goroutine before they are queued, so that work runs in parallel
// and a refused event never reaches the file.
//
// # Reads
//
// Read, Run, Session, Sessions and ActiveRuns run on the caller's goroutine
// in bbolt read transactions, concurrently with each other and with the
// committer. They see only committed data.
//
// # Layout
//
//	sessions  session id → SessionMeta JSON
//	owners    uvarint(len owner) owner, be64(creation order) → session id
//	runs      run id → RunMeta JSON, its fixed part (id, session, owner, created_at, request)
//	heads     run id → the run's changing part: last seq, terminal state, session, newest extents, newest idempotency keys
//	log       be64(position) → event row (row.go); one log for all runs
//	index     run id, 0, be64(first seq) → a segment of the run's extents (index.go)
//	keys      run id → bucket: idempotency key → be64(seq), for keys spilled from the head
//	active    run id → ∅, every run without a terminal event
//	ended     be64(terminal_at µs) run id → ∅, terminal runs by age, for Trim
//	outbox    be64(n) → journal.OutboxEntry JSON: the notable events, written in
//	          the append's transaction (Options.Outbox; outbox.go)
//
// Events go to one global log in commit order, not to a bucket per run: a
// batch that appends to a hundred runs then dirties a few adjacent log pages
// and the heads it changes, instead of a page per run (measured six times
// cheaper per event). A run finds its events through extents (runs of
// consecutive seqs at consecutive log positions) kept in its head and, once
// there are enough, moved to a segment of the index. Reading a run is one
// seek per extent; a run appended alone is one extent per batch or fewer.
// Idempotency keys likewise stay in the head (which the batch rewrites
// anyway) until there are spillKeys of them, then move to the run's keys
// bucket together: a batch over many runs with keyed appends (every append
// of the executor) then writes one keys page per run every spillKeys
// appends instead of one per run per batch.
//
// # Concurrency
//
// All methods are safe for concurrent use. Subscriber callbacks run on the
// committer goroutine after the commit and before the writers are answered:
// they must not block, must not call back into the store (cancel included)
// and must not modify the event's payload, which is shared.
package bolt
