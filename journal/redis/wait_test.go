package redis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// With WaitReplicas an append returns only once that many replicas of its
// master hold it: on the cluster (one replica per master) the event is on
// the replica as soon as Append returns; asking for two replicas, or for
// one of a Redis without replicas, fails with ErrNotReplicated after
// WaitTimeout, the event journaled on the master.
func TestWaitReplicas(t *testing.T) {
	url := clusterURL(t)
	ctx := context.Background()
	s := openStore(t, Options{URL: url, WaitReplicas: 1, WaitTimeout: 2 * time.Second})
	mkRun(t, s, "s1", "r1")
	for i := range 20 {
		e, err := s.Append(ctx, token("s1", "r1", "x"), "")
		if err != nil {
			t.Fatalf("append %d with WAIT 1: %v", i, err)
		}
		// The replica of the run's master has it now.
		key := s.k.events(s.k.shardOf("s1"), "r1")
		master, err := s.rdb.(*goredis.ClusterClient).MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		replica := replicaOf(t, master)
		got, err := replica.XRange(ctx, key, entryID(e.Seq), entryID(e.Seq)).Result()
		if err != nil || len(got) != 1 {
			t.Fatalf("replica has %v, %v for seq %d right after Append returned", got, err, e.Seq)
		}
	}

	two := openStore(t, Options{URL: url, Prefix: s.opts.Prefix, WaitReplicas: 2, WaitTimeout: 200 * time.Millisecond})
	_, err := two.Append(ctx, token("s1", "r1", "y"), "k-two")
	if !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("append with WAIT 2 and one replica: %v, want ErrNotReplicated", err)
	}
	if m, _ := s.Run(ctx, "r1"); m.LastSeq != 21 {
		t.Fatalf("last_seq %d after the unreplicated append, want 21 (journaled on the master)", m.LastSeq)
	}

	single := openStore(t, Options{WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond})
	mkRun(t, single, "s1", "r1")
	if _, err := single.Append(ctx, token("s1", "r1", "z"), ""); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("append with WAIT 1 on a Redis without replicas: %v, want ErrNotReplicated", err)
	}
}

// replicaOf returns a client of a replica of master (read-only commands).
func replicaOf(t *testing.T, master *goredis.Client) *goredis.Client {
	t.Helper()
	ctx := context.Background()
	for _, n := range cluster.Nodes {
		if n.Addr() == master.Options().Addr || !n.Running() {
			continue
		}
		c := goredis.NewClient(&goredis.Options{Addr: n.Addr()})
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_port:"+portOf(master.Options().Addr)+"\r") {
			if err := c.Do(ctx, "READONLY").Err(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		}
		c.Close()
	}
	t.Fatalf("no replica of %s", master.Options().Addr)
	return nil
}

func portOf(addr string) string {
	_, port, _ := strings.Cut(addr, ":")
	return port
}
