package journal_test

import (
	"fmt"
	"testing"

	"github.com/runhub/runhub/journal"
)

// replyError stands for a Redis reply error (go-redis's redis.Error).
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// A reply counts as "cannot serve now" by its whole first word: BUSY (a
// script running) does, BUSYGROUP and BUSYKEY (the group or key exists, a
// fault of the request) do not.
func TestUnavailableRepliesByWholeWord(t *testing.T) {
	for _, c := range []struct {
		reply string
		want  bool
	}{
		{"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.", true},
		{"LOADING Redis is loading the dataset in memory", true},
		{"READONLY You can't write against a read only replica.", true},
		{"CLUSTERDOWN The cluster is down", true},
		{"TRYAGAIN Multiple keys request during rehashing of slot", true},
		{"ERR max number of clients reached", true},
		{"MOVED 3999 127.0.0.1:6381", true},
		{"ASK 3999 127.0.0.1:6381", true},
		{"ASKING is not allowed", false},
		{"BUSYGROUP Consumer Group name already exists", false},
		{"BUSYKEY Target key name already exists.", false},
		{"LOADINGX something else", false},
		{"ERR wrong number of arguments", false},
	} {
		err := fmt.Errorf("journal: append: %w", replyError(c.reply))
		if got := journal.Unavailable(err); got != c.want {
			t.Errorf("Unavailable(%q) = %v, want %v", c.reply, got, c.want)
		}
	}
}
