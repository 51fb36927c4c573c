// Package redis is the Redis Streams backend of journal.Store: the journal,
// the session registry and the bus of runhub's scaled deployment, shared by
// every hub replica and runner that opens it with the same key prefix.
//
// # Key layout
//
// With the default prefix "rh:" (RID a run id, SID a session id):
//
//	rh:run:{RID}          hash    id, session_id, owner, created_at, request,
//	                              last_seq, terminal, terminal_type, terminal_at
//	rh:run:{RID}:ev       stream  the run's events; entry id "<seq>-0", fields
//	                              s (session), t (type), c (created_at),
//	                              x (terminal "1"/"0"), p (payload)
//	rh:run:{RID}:idem     hash    idempotency key → seq
//	rh:sess:{SID}         hash    id, owner, title, created_at, active_run
//	rh:sess:{SID}:runs    list    the session's run ids, oldest first
//	rh:owner:<owner>      list    the owner's session ids, in creation order
//	rh:runs:active        set     run ids without a terminal event
//	rh:runs:ended         zset    terminal run ids scored by terminal_at (Trim)
//	rh:bus:<n>            stream  status feed shard n (0 ≤ n < Options.Shards),
//	                              MAXLEN ~ Options.FeedMaxLen; fields of the run
//	                              entry plus r (run id), q (seq); the payload of
//	                              delta events is "{}". A session change with
//	                              no event (create_session.lua, begin_run.lua,
//	                              delete_session.lua, UpdateSession's MULTI)
//	                              adds a record of just
//	                              s and t = journal.SessionChanged
//	rh:wake:<random>      stream  one Store's wake stream (tiny, expires)
//	rh:batch:<random>     string  the replies of one append batch, kept for
//	                              Options.ReplyCacheTTL
//
// Because entry ids are seqs, Read is one XRANGE from "<after+1>-0" and a
// tail resumes from "<last seq>-0".
//
// # Scripts
//
// Every multi-key change is one Lua script (lua/*.lua, embedded, run with
// EVALSHA and an EVAL fallback): append.lua, begin_run.lua (the active-run
// conflict check with the registration), create_session.lua, trim.lua and
// delete_session.lua (a session without an active run and every key of its
// runs; it re-checks the run list the caller read).
//
// append.lua journals a batch of appends: concurrent Appends are grouped
// (group commit, batch.go) so that Redis runs one script and the client
// makes one round trip per batch rather than per event; a lone Append is a
// batch of one, sent from its own goroutine. For each append, atomically,
// the script refuses an unknown run; returns the stored event for a known
// idempotency key (before the terminal check, so retrying a terminal
// append succeeds); refuses a run that has ended, returning its terminal
// event; XADDs the event at seq last_seq+1 before touching anything else (a
// script is not rolled back, so a failed XADD leaves no gap); updates the
// meta (last_seq, and terminal, terminal_type, terminal_at); on a terminal
// event moves the run from runs:active to runs:ended and clears the
// session's active_run; and XADDs the feed record to the session's shard.
// Last it stores the batch's replies under the batch's random key: go-redis
// resends a command whose reply was lost (timeout, dropped connection), and
// the resent batch is answered from there instead of journaling twice.
//
// # Redis Cluster
//
// One run's keys share the hash tag {RID}, so Read, Run and the tails'
// per-run work stay in one slot. The scripts, however, also touch keys in
// other slots (the session {SID}, the feed shard, the runs:* indexes), and
// the run tail reads many runs' streams in one XREAD: this backend needs a
// single Redis primary (with replicas or Sentinel for failover), not a
// Cluster. That is the trade: exact, atomic invariants (seq, one terminal
// event, the conflict check and the feed record all decided together) with
// no cross-slot protocol. One primary sustained 28k–44k appends/s on two
// shared cores (docs/benchmarks.md). A Cluster port would tag every key of
// a session and its runs with the session's feed shard ({rh-<n>}), keep
// per-shard indexes (active, ended, owners), and group the multiplexed read
// by slot, one XREAD per node.
//
// # Bus
//
// Two tail goroutines per Store, each on one dedicated connection, whatever
// the number of subscriptions:
//
//   - the feed tail reads every feed shard with XREAD BLOCK, from the shards'
//     heads at the first SubscribeFeed, then from the last ids it read;
//   - the run tail reads every subscribed run's stream in one XREAD BLOCK,
//     each from the lowest seq its subscribers have. SubscribeRun looks up
//     the run's last seq first, so every event appended after it returns is
//     delivered; when it adds a run to the read it XADDs to the Store's wake
//     stream, which the blocked read includes, so the read returns and the
//     next one covers the new run.
//
// go-redis does not interrupt a blocked read when its context ends, so
// every read is bounded (Options.Block) and Close also writes to the wake
// stream. On an error a tail drops its connection, waits (exponential
// backoff) and resumes from the ids it had: nothing journaled is skipped and
// nothing is delivered twice.
//
// # Concurrency
//
// A Store's methods are safe for concurrent use. Subscriber callbacks run on
// the tail goroutines, one at a time per tail, and must not block; cancel
// waits for a running callback, so it must not be called from inside its
// own callback. A Store owns Options.Flushers append goroutines and the two
// tails; Close journals the queued appends, stops them all and waits.
package redis
