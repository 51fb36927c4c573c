package bolt

import "time"

// Options configure a Store. The zero value is a safe, durable default.
type Options struct {
	// Now is the clock that stamps created_at on events, sessions and runs
	// that come without one. Default time.Now.
	Now func() time.Time

	// GroupCommit tunes how appends are batched into transactions.
	GroupCommit GroupCommit

	// LockTimeout is how long Open waits for the file lock another process
	// holds. Default 1s; negative waits forever.
	LockTimeout time.Duration

	// NoSyncFreelist skips writing bbolt's list of free pages with every
	// commit, as etcd does: commits write a page less, and Open rebuilds
	// the list by scanning the whole file instead, which makes the hub's
	// start-up grow with the sessions it keeps (about 55 ms per 100,000
	// finished sessions). Default false: the list is written, and Open
	// reads it.
	NoSyncFreelist bool

	// NoSync skips fsync on commit (bbolt's and the event log's). DANGEROUS: a crash or power loss can
	// lose acknowledged events or corrupt the file. For benchmarks and
	// throwaway tests only; never in a deployment. Default false.
	NoSync bool

	// SyncEvery, when above 0, lets an append be acknowledged before the
	// event log is fdatasynced: a batch of events only is written (so that
	// a crash of the process, SIGKILL included, loses nothing
	// acknowledged) and fdatasynced at most SyncEvery later, together with
	// the batches written meanwhile. A batch that changes bbolt too (a
	// run's start or end, a session's change, ...) is synced with what
	// precedes it before bbolt commits, as always, so the journal stays
	// consistent; a crash of the machine or a power loss can lose the
	// events of the last SyncEvery, which recovery cuts as a torn tail.
	// Default 0: every batch is fdatasynced before its appends are
	// acknowledged.
	SyncEvery time.Duration

	// segmentBytes is the size past which the event log starts a new
	// segment file. Default DefaultSegmentBytes; tests set it small.
	segmentBytes uint64

	// checkpoint is when the durable streams' overlay goes to bbolt
	// (streamoverlay.go): at so many entries or so old. Defaults
	// checkpointEntries and checkpointEvery; tests change them.
	checkpoint struct {
		entries int
		every   time.Duration
	}

	// Outbox records every notable event (journal.Notable: a prompt, a goal
	// change, a run's end) in the outbox, in the transaction that appends
	// it, for a sender of notifications (webhook.Sender) to read with
	// OutboxList and clear with OutboxDelete. Default false: no outbox.
	Outbox bool
}

// GroupCommit bounds one batch of writes committed in one transaction.
type GroupCommit struct {
	// MaxBatch is the most writes one transaction applies. Larger batches
	// amortise the fsync over more appends; a batch holds its writers'
	// answers until it commits. Default 1000.
	MaxBatch int

	// MaxWait is how long a batch may wait for appends that are on their
	// way: called, being validated on their callers' goroutines, not yet
	// queued. Default 0: commit what is queued at once; appends that arrive
	// during a commit form the next batch, so batches grow with load anyway.
	// A wait of 100µs–1ms can merge those "cohorts" into fewer, larger
	// commits (fewer fsyncs) at the cost of up to that much latency when
	// many runs append at once. A lone writer never waits.
	MaxWait time.Duration

	// Interval is the least time from the start of one commit to the start
	// of the next: writes queued sooner wait for it, and commit together
	// (up to MaxBatch, which commits at once). Each commit of the event log
	// is one fdatasync, whose CPU (~100µs on a virtual disk) is paid per
	// commit, not per event; under a steady stream of appends from many
	// runs, an interval brings the fdatasyncs down to about 1/Interval a
	// second (a commit that left nothing queued lets the next start at
	// once) and adds at most Interval to an append's wait. Only a batch whose
	// first writes queued while the previous commit ran waits: writers
	// that each wait for their append before the next (one run streaming
	// as fast as it can, or a few) are all in the batch being committed,
	// nothing queues meanwhile, and they go on at full speed; a write
	// after a quiet Interval commits at once. Default 0: commit as soon as
	// the previous commit ends.
	Interval time.Duration
}

// Defaults.
const (
	DefaultMaxBatch    = 1000
	DefaultLockTimeout = time.Second
)

// MaxKeyLen bounds an idempotency key.
const MaxKeyLen = 512

// MaxOwnerLen bounds a session's owner.
const MaxOwnerLen = 512

func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.GroupCommit.MaxBatch <= 0 {
		o.GroupCommit.MaxBatch = DefaultMaxBatch
	}
	if o.segmentBytes == 0 {
		o.segmentBytes = DefaultSegmentBytes
	}
	if o.checkpoint.entries <= 0 {
		o.checkpoint.entries = checkpointEntries
	}
	if o.checkpoint.every <= 0 {
		o.checkpoint.every = checkpointEvery
	}
	if o.SyncEvery < 0 {
		o.SyncEvery = 0
	}
	if o.GroupCommit.MaxWait < 0 {
		o.GroupCommit.MaxWait = 0
	}
	if o.GroupCommit.Interval < 0 {
		o.GroupCommit.Interval = 0
	}
	switch {
	case o.LockTimeout == 0:
		o.LockTimeout = DefaultLockTimeout
	case o.LockTimeout < 0:
		o.LockTimeout = 0 // bbolt: wait forever
	}
	return o
}
