// Package journaltest is the conformance suite of journal.Store: one set of
// tests and benchmarks that every journal backend (journal/bolt,
// journal/redis) runs against itself.
//
// A backend's test package calls Run with a Backend that opens fresh, empty
// stores and can reopen one over the same data, and RunBenchmarks with its
// open function:
//
//	func TestStore(t *testing.T) {
//		journaltest.Run(t, journaltest.Backend{Open: open, Reopen: reopen})
//	}
//
//	func BenchmarkStore(b *testing.B) { journaltest.RunBenchmarks(b, open) }
//
// The suite checks the invariants of journal/doc.go and of the journal
// section of the architecture, plus the contract details the interface
// comments leave implicit. Those details, which every backend keeps:
//
//   - RunMeta.TerminalAt is the terminal event's created_at, and Trim
//     compares it with its cutoff.
//   - An append with a key that was already used returns the event stored the
//     first time with a nil error, even when that event was the terminal one
//     (the retry of a terminal append succeeds); the key check comes before
//     the terminal check.
//   - Read of a run that does not exist (or was trimmed) is ErrNotFound; Read
//     past the last seq is an empty page.
//   - Sessions of an owner without sessions is an empty list and no error.
//   - Events are delivered to subscribers with their redacted payload; the
//     feed may replace the payload of delta events with "{}".
//   - Close may be called more than once; calls after the first return nil
//     or ErrClosed. Every other method returns ErrClosed after Close.
//
// The suite does not run subtests in parallel: each subtest opens its own
// store, and some check for leaked goroutines around a store's life.
package journaltest
