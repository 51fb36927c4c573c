package redis

import (
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// clusterSlots is the number of Redis Cluster hash slots.
const clusterSlots = 16384

// maxShards bounds Options.Shards (each shard is a hash tag, a feed stream
// and, on a Cluster, one blocking reader per tail).
const maxShards = 1024

// keyspace names every key of one journal (see doc.go for the layout).
// Every key but a run's locator carries the hash tag of one shard, so every
// script and transaction touches a single Cluster slot.
type keyspace struct {
	prefix string
	tags   []string // hash tag of each shard, without the braces
}

func newKeyspace(prefix string, shards int) (keyspace, error) {
	if strings.ContainsAny(prefix, "{}") {
		return keyspace{}, fmt.Errorf("journal/redis: Prefix %q: braces would change the keys' hash tags", prefix)
	}
	if shards > maxShards {
		return keyspace{}, fmt.Errorf("journal/redis: Shards %d: at most %d", shards, maxShards)
	}
	return keyspace{prefix: prefix, tags: shardTags(shards)}, nil
}

// shardTags picks, for each shard n of count, a hash tag whose slot lies in
// the n-th of count equal slices of the slot range: "s<n>" when it does,
// else the first "s<n>.<k>" that does. Whatever the number of masters of a
// Cluster that splits its slots evenly (as redis-cli --cluster create does),
// the shards spread over them evenly; the tags depend only on count, so
// every Store with the same Shards uses the same keys.
func shardTags(count int) []string {
	tags := make([]string, count)
	for n := range count {
		lo, hi := n*clusterSlots/count, (n+1)*clusterSlots/count
		tag := "s" + strconv.Itoa(n)
		for k := 1; ; k++ {
			if slot := int(crc16(tag)) % clusterSlots; slot >= lo && slot < hi {
				break
			}
			tag = "s" + strconv.Itoa(n) + "." + strconv.Itoa(k)
		}
		tags[n] = tag
	}
	return tags
}

// crc16 is the CRC-16/XMODEM of Redis Cluster's key → slot mapping.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

func (k keyspace) shards() int { return len(k.tags) }

// base starts every key of shard n: "<prefix>{<tag>}:".
func (k keyspace) base(n int) string { return k.prefix + "{" + k.tags[n] + "}:" }

// shardOf is the shard of a session, and of all its runs.
func (k keyspace) shardOf(sessionID string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(sessionID))
	return int(h.Sum32() % uint32(len(k.tags)))
}

// run is the meta hash of a run of shard n.
func (k keyspace) run(n int, id string) string { return k.base(n) + "run:" + id }

// events is the run's event stream; entry ids are "<seq>-0".
func (k keyspace) events(n int, id string) string { return k.base(n) + "run:" + id + ":ev" }

// idem is the run's idempotency hash: key → seq.
func (k keyspace) idem(n int, id string) string { return k.base(n) + "run:" + id + ":idem" }

// session is the meta hash of a session of shard n.
func (k keyspace) session(n int, id string) string { return k.base(n) + "sess:" + id }

// sessionRuns is the session's list of run ids, oldest first.
func (k keyspace) sessionRuns(n int, id string) string { return k.base(n) + "sess:" + id + ":runs" }

// owner is the list of an owner's session ids of shard n, in creation order.
func (k keyspace) owner(n int, owner string) string { return k.base(n) + "owner:" + owner }

// active is the set of shard n's run ids without a terminal event.
func (k keyspace) active(n int) string { return k.base(n) + "runs:active" }

// queued is the set of shard n's sessions that have queued messages
// (UpdateSession and BeginRunUpdate keep it; IdleQueues reads it).
func (k keyspace) queued(n int) string { return k.base(n) + "sess:queued" }

// ended is the zset of shard n's terminal runs scored by terminal_at.
func (k keyspace) ended(n int) string { return k.base(n) + "runs:ended" }

// feed is status feed shard n.
func (k keyspace) feed(n int) string { return k.base(n) + "bus" }

// outbox is shard n's outbox stream (outbox.go).
func (k keyspace) outbox(n int) string { return k.base(n) + "outbox" }

// outboxState is shard n's hash of the sender's state: entry id → state.
func (k keyspace) outboxState(n int) string { return k.base(n) + "outbox:state" }

// batch is the reply cache of one append batch of shard n (token random).
func (k keyspace) batch(n int, token string) string { return k.base(n) + "batch:" + token }

// wake is a Store's wake stream in shard n (token is random per Store).
func (k keyspace) wake(n int, token string) string { return k.base(n) + "wake:" + token }

// loc is a run's locator: the number of its shard, written by BeginRun
// before the run exists, so that a lookup by run id alone (Read, Run,
// SubscribeRun) finds the run's keys.
func (k keyspace) loc(id string) string { return k.prefix + "loc:" + id }

// parseShard reads a locator's value.
func (k keyspace) parseShard(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n >= len(k.tags) {
		return 0, errors.New("journal/redis: run locator " + strconv.Quote(v) + " names no shard (is Shards the same on every hub?)")
	}
	return n, nil
}

//go:embed lua/*.lua
var luaFiles embed.FS

func mustScript(name string) *goredis.Script {
	src, err := luaFiles.ReadFile("lua/" + name)
	if err != nil {
		panic(err)
	}
	return goredis.NewScript(string(src))
}

var (
	appendScript        = mustScript("append.lua")
	beginRunScript      = mustScript("begin_run.lua")
	createSessionScript = mustScript("create_session.lua")
	trimScript          = mustScript("trim.lua")
	deleteSessionScript = mustScript("delete_session.lua")
	dropLocatorScript   = mustScript("drop_locator.lua")
	dropQueuedScript    = mustScript("drop_queued.lua")
	markScript          = mustScript("mark.lua")
	allScripts          = []*goredis.Script{appendScript, beginRunScript, createSessionScript, trimScript, deleteSessionScript, dropQueuedScript, markScript, commitStreamScript, dropStreamScript}
)
