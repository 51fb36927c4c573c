package redis

import (
	"embed"
	"hash/fnv"
	"strconv"

	goredis "github.com/redis/go-redis/v9"
)

// keyspace names every key of one journal (see doc.go for the layout).
type keyspace struct {
	prefix string
	shards int
}

// run is the meta hash of a run; its id in braces is the Cluster hash tag
// shared by every key of the run.
func (k keyspace) run(id string) string { return k.prefix + "run:{" + id + "}" }

// events is the run's event stream; entry ids are "<seq>-0".
func (k keyspace) events(id string) string { return k.prefix + "run:{" + id + "}:ev" }

// idem is the run's idempotency hash: key → seq.
func (k keyspace) idem(id string) string { return k.prefix + "run:{" + id + "}:idem" }

// session is the meta hash of a session.
func (k keyspace) session(id string) string { return k.prefix + "sess:{" + id + "}" }

// sessionRuns is the session's list of run ids, oldest first.
func (k keyspace) sessionRuns(id string) string { return k.prefix + "sess:{" + id + "}:runs" }

// owner is the list of an owner's session ids, in creation order.
func (k keyspace) owner(owner string) string { return k.prefix + "owner:" + owner }

// active is the set of run ids without a terminal event.
func (k keyspace) active() string { return k.prefix + "runs:active" }

// ended is the zset of terminal runs scored by terminal_at (for Trim).
func (k keyspace) ended() string { return k.prefix + "runs:ended" }

// feed is status feed shard n.
func (k keyspace) feed(n int) string { return k.prefix + "bus:" + strconv.Itoa(n) }

// feedOf is the feed shard of a session.
func (k keyspace) feedOf(sessionID string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(sessionID))
	return k.feed(int(h.Sum32() % uint32(k.shards)))
}

// batch is the reply cache of one append batch (token is random).
func (k keyspace) batch(token string) string { return k.prefix + "batch:" + token }

// wake is a Store's own wake stream (id is random per Store).
func (k keyspace) wake(id string) string { return k.prefix + "wake:" + id }

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
	allScripts          = []*goredis.Script{appendScript, beginRunScript, createSessionScript, trimScript, deleteSessionScript}
)
