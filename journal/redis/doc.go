// Package redis is the Redis Streams backend of journal.Store: the journal,
// the session registry and the bus of runhub's scaled deployment, shared by
// every hub replica and runner that opens it with the same key prefix.
//
// # Key layout
//
// The journal is split into Options.Shards shards (default 16). A session,
// its runs and its status feed records all live in one shard, chosen by a
// hash of the session id (FNV-1a mod Shards); every key of shard n starts
// with "<prefix>{<tag n>}:", the braces making the tag the Redis Cluster
// hash tag, so each shard is one slot. The tags are "s<n>" or "s<n>.<k>",
// chosen so that shard n's slot lies in the n-th of Shards equal slices of
// the slot range: the shards spread evenly over the masters of a Cluster
// that splits its slots evenly (as redis-cli --cluster create does).
//
// With the default prefix "rh:" (RID a run id, SID a session id, {T} the
// hash tag of the session's shard):
//
//	rh:{T}:run:RID        hash    id, session_id, owner, created_at, request,
//	                              last_seq, terminal, terminal_type, terminal_at
//	rh:{T}:run:RID:ev     stream  the run's events; entry id "<seq>-0", fields
//	                              s (session), t (type), c (created_at),
//	                              x (terminal "1"/"0"), p (payload)
//	rh:{T}:run:RID:idem   hash    idempotency key → seq
//	rh:{T}:sess:SID       hash    id, owner, title, created_at, active_run,
//	                              state (queue, goal, recent keys)
//	rh:{T}:sess:SID:runs  list    the session's run ids, oldest first
//	rh:{T}:owner:<owner>  list    the owner's session ids of this shard, in
//	                              creation order
//	rh:{T}:runs:active    set     the shard's run ids without a terminal event
//	rh:{T}:sess:queued    set     the shard's session ids with queued messages
//	                              (UpdateSession, BeginRunUpdate; IdleQueues
//	                              drops the ids of deleted or emptied ones)
//	rh:{T}:runs:ended     zset    the shard's terminal run ids scored by
//	                              terminal_at (Trim)
//	rh:{T}:bus            stream  the shard's status feed, MAXLEN ~
//	                              Options.FeedMaxLen; fields of the run entry
//	                              plus r (run id), q (seq); the payload of
//	                              delta events is "{}". A session change with
//	                              no event (create_session.lua, begin_run.lua,
//	                              delete_session.lua, UpdateSession's MULTI)
//	                              adds a record of just
//	                              s and t = journal.SessionChanged. With
//	                              Options.FeedInterval a run's deltas are
//	                              counted in its hash (fa, fk, fn, fl, fc,
//	                              fq) and go with its next record (k, n, l,
//	                              lc) or a journal.DeltasSkipped mark
//	rh:{T}:outbox         stream  the shard's notable events (journal.Notable),
//	                              fields r, s, q, t, added by append.lua in
//	                              the same run as the event once
//	                              EnableOutbox made the stream (outbox.go)
//	rh:{T}:outbox:state   hash    outbox entry id → the sender's state
//	rh:{T}:wake:<random>  stream  one Store's wake stream of the shard's
//	                              readers (tiny, expires)
//	rh:{T}:batch:<random> string  the replies of one append batch, kept for
//	                              Options.ReplyCacheTTL
//	rh:loc:RID            string  the run's locator: its shard number
//	rh:ds:{NAME}:m        hash    a durable stream's meta: v (version), g
//	                              (generation), m (journal.StreamMeta JSON)
//	rh:ds:{NAME}:x:GEN    stream  its records of generation GEN, an entry
//	                              each, ID INDEX-0, field d (end, count,
//	                              data); both under the stream name's hash
//	                              tag, so the commit script (streams.go) is
//	                              one slot (rh:ds:{NAME}:r:GEN, a list, is
//	                              an earlier runhub's form, still read)
//	rh:ds:expiring        set     the names of streams with a TTL or an
//	                              expiry (a superset), for the reaper
//	rh:{T}:ds:notify      channel a stream's name on every commit of a
//	                              stream of partition T (FNV-1a of the name),
//	                              to the Stores with live readers in it
//	                              (sharded pub/sub on a Cluster; notify.go)
//
// Read, Run and SubscribeRun know only a run id: they read the run's
// locator (written by BeginRun before the run exists, deleted by Trim)
// once, and the Store caches it (a run never moves). Because entry ids are
// seqs, Read is then one XRANGE from "<after+1>-0" and a tail resumes from
// "<last seq>-0".
//
// Layouts before the shard tags (keys rh:run:{RID}, rh:sess:{SID},
// rh:bus:<n>, rh:runs:active…) are not read: a Store started on such a
// Redis sees an empty journal. Drain the old hubs (let the runs end), then
// start the new ones on a fresh prefix or an emptied Redis.
//
// # Scripts
//
// Every multi-key change is one Lua script (lua/*.lua, embedded, run with
// EVALSHA and an EVAL fallback): append.lua, begin_run.lua (the active-run
// conflict check with the registration), create_session.lua, trim.lua and
// delete_session.lua (a session without an active run and every key of its
// runs; it re-checks the run list the caller read; the runs' locators,
// outside the shard, are deleted after it). Each touches the keys of one
// shard only (one slot); on a single Redis an append batch may mix shards.
//
// append.lua journals a batch of appends: concurrent Appends are grouped
// (group commit, batch.go) so that Redis runs one script and the client
// makes one round trip per batch rather than per event (on a Cluster, one
// script per shard of the batch, all sent at once); a lone Append is a
// batch of one, sent from its own goroutine. For each append, atomically,
// the script refuses an unknown run; returns the stored event for a known
// idempotency key (before the terminal check, so retrying a terminal
// append succeeds); refuses a run that has ended, returning its terminal
// event; XADDs the event at seq last_seq+1 before touching anything else (a
// script is not rolled back, so a failed XADD leaves no gap); updates the
// meta (last_seq, and terminal, terminal_type, terminal_at); on a terminal
// event moves the run from the shard's runs:active to its runs:ended and
// clears the session's active_run; and XADDs the feed record to the
// shard's feed. Last it stores the batch's replies under the batch's
// random key: go-redis resends a command whose reply was lost (timeout,
// dropped connection, a Cluster redirection), and the resent batch is
// answered from there instead of journaling twice.
//
// # Redis Cluster
//
// Options.URL "redis+cluster://h1:p1,h2:p2,…" (NewClient) or a
// *goredis.ClusterClient as Options.Client runs the journal on a Redis
// Cluster with the same code: the scripts, UpdateSession's WATCH/MULTI and
// every multi-key read stay in one shard's slot, and a pipeline spanning
// shards is split by go-redis per node. What differs is grouping: on a
// Cluster a command may not span slots, so append batches are split per
// shard and each tail runs one reader per shard (a blocking XREAD of that
// shard's streams and its own wake stream); on a single Redis one script
// and one reader per tail cover every shard.
//
// Redis replicates asynchronously: a write acknowledged by a master that
// dies before its replica received it is lost when the replica takes over
// (docs/operations.md says what that means for a run and how
// RUNHUB_REDIS_WAIT_REPLICAS closes it).
//
// # Bus
//
// Two tails per Store, each one reader goroutine per group of shards (one
// group on a single Redis, one per shard on a Cluster), each reader on one
// dedicated connection (to its shard's master on a Cluster, found again
// after a failover), whatever the number of subscriptions:
//
//   - the feed tail reads the feed shards some subscriber has an interest
//     in (SubscribeInterest: the shards of the sessions it watches, every
//     shard after a WatchAll or for SubscribeFeed) with XREAD BLOCK, each
//     from its head when it became wanted, then from the last id it read;
//     a group with no interest reads nothing (feed.go);
//   - the run tail reads every subscribed run's stream in one XREAD BLOCK
//     per group, each from the lowest seq its subscribers have.
//     SubscribeRun looks up the run's shard and last seq first, so every
//     event appended after it returns is delivered; when it adds a run to a
//     read it XADDs to the group's wake stream, which the blocked read
//     includes, so the read returns and the next one covers the new run. A
//     run not begun yet waits for its locator (looked up every
//     Options.Block, at once when this Store begins it).
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
// the tail goroutines, one at a time per subscriber, and must not block;
// cancel waits for a running callback, so it must not be called from
// inside its own callback. A Store owns Options.Flushers append
// goroutines, the tails' readers and the run tail's resolver; Close
// journals the queued appends, stops them all and waits.
package redis
