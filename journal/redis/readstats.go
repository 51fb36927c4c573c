package redis

import (
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"
)

// ReadStats counts what a Store read from Redis since it was opened: the
// records of the status feed (its feed tail), of runs' event streams (the
// run tail and Read) and the messages of the durable streams' notify
// channels, each with its bytes (entry ids, field names and values as
// Redis sent them, without the protocol's framing). It is what the hub's
// metrics export (runhub_redis_read_*), and what says that a replica reads
// only what its tabs need.
type ReadStats struct {
	FeedRecords, FeedBytes      uint64
	RunRecords, RunBytes        uint64
	NotifyMessages, NotifyBytes uint64
}

type readStats struct {
	feedRecords, feedBytes      atomic.Uint64
	runRecords, runBytes        atomic.Uint64
	notifyMessages, notifyBytes atomic.Uint64
}

// ReadStats returns the Store's counts of what it read from Redis.
func (s *Store) ReadStats() ReadStats {
	r := &s.reads
	return ReadStats{
		FeedRecords: r.feedRecords.Load(), FeedBytes: r.feedBytes.Load(),
		RunRecords: r.runRecords.Load(), RunBytes: r.runBytes.Load(),
		NotifyMessages: r.notifyMessages.Load(), NotifyBytes: r.notifyBytes.Load(),
	}
}

// count adds msgs to records and bytes.
func countMessages(records, bytes *atomic.Uint64, msgs []goredis.XMessage) {
	if len(msgs) == 0 {
		return
	}
	n := 0
	for _, m := range msgs {
		n += len(m.ID)
		for k, v := range m.Values {
			n += len(k)
			if s, ok := v.(string); ok {
				n += len(s)
			}
		}
	}
	records.Add(uint64(len(msgs)))
	bytes.Add(uint64(n))
}
