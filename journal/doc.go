// Package journal is runhub's durable, append-only record of runs and the
// registry of sessions, and the bus that carries new events to whoever
// listens: a live tail of one run and the feed of every session.
//
// Store is the one interface; backends live beside it as sub-packages
// (journal/bolt: an embedded bbolt file; journal/redis: Redis Streams) and
// pass the same conformance suite (journal/journaltest). The invariants every
// backend keeps:
//
//  1. Append assigns seq atomically: contiguous from 1 per run, also with
//     concurrent writers for the same run.
//  2. Exactly one terminal event per run; an append after it fails with
//     ErrTerminal; a second terminal attempt is a no-op that reports the
//     existing terminal event (and ErrTerminal).
//  3. Read returns events in seq order; a page never skips.
//  4. Subscribing then reading gives a seamless stream: subscribers see each
//     event after it is durable, in seq order per run.
//  5. A session knows its runs in order and its active run; BeginRun while one
//     is active is ErrConflict, decided atomically in the store.
//  6. Payloads are redacted and bounded before they are persisted (Prepare).
//  7. Terminal runs are trimmed after a retention period; active runs never.
//
// All Store methods are safe for concurrent use. Subscriber callbacks run on
// the store's delivery goroutine: they must not block and must not call back
// into the store.
package journal
