package redis

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/runhub/runhub/journal"
)

// journal.Unavailable recognizes what the Redis client returns while Redis
// cannot serve — a socket nobody listens on, a pool timeout, a server
// answering LOADING, READONLY (also inside a discarded MULTI/EXEC) — and
// nothing else: a nil reply, a command error, not found.
func TestUnavailable_RedisClientErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gone := goredis.NewClient(&goredis.Options{Network: "unix", Addr: filepath.Join(t.TempDir(), "none.sock"), MaxRetries: -1})
	defer gone.Close()
	dialErr := gone.Ping(ctx).Err()
	c := admin(t)
	syntaxErr := c.Do(ctx, "SET").Err()
	nilErr := c.Get(ctx, "unavailable:no such key").Err()
	// A real reply error of each kind that passes, built by the client's
	// own parser from the server's text.
	loading := c.Eval(ctx, `return redis.error_reply("LOADING Redis is loading the dataset in memory")`, nil).Err()
	readonly := c.Eval(ctx, `return redis.error_reply("READONLY You can't write against a read only replica.")`, nil).Err()
	// A MULTI/EXEC Redis discards (EXECABORT): the refused command decides.
	cmds, execAbort := c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.Set(ctx, "unavailable:k", "v", 0)
		p.Do(ctx, "NOSUCHCOMMAND")
		return nil
	})
	if !goredis.HasErrorPrefix(execAbort, "EXECABORT") {
		t.Fatalf("the transaction was not discarded: %v", execAbort)
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"dial to a socket nobody listens on", dialErr, true},
		{"wrapped by the journal", fmt.Errorf("journal/redis: read: %w", dialErr), true},
		{"pool timeout", goredis.ErrPoolTimeout, true},
		{"LOADING", loading, true},
		{"READONLY", readonly, true},
		{"READONLY behind EXECABORT", execAbortCause([]goredis.Cmder{goredis.NewStatusCmd(ctx), errCmd(ctx, readonly)}, execAbort), true},
		{"unknown command behind EXECABORT", execAbortCause(cmds, execAbort), false},
		{"marked", fmt.Errorf("x: %w", journal.ErrUnavailable), true},
		{"WAIT shortfall", fmt.Errorf("%w: 0 of 1 replicas within 2s", ErrNotReplicated), true},
		{"command error", syntaxErr, false},
		{"nil reply", nilErr, false},
		{"not found", journal.ErrNotFound, false},
		{"nil", nil, false},
	} {
		if tc.err == nil && tc.name != "nil" {
			t.Fatalf("%s: no error to classify", tc.name)
		}
		if got := journal.Unavailable(tc.err); got != tc.want {
			t.Errorf("%s: Unavailable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

func errCmd(ctx context.Context, err error) goredis.Cmder {
	c := goredis.NewStatusCmd(ctx)
	c.SetErr(err)
	return c
}
