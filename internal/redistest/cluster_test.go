package redistest

import (
	"context"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// roles counts the running nodes that are masters and replicas.
func roles(t *testing.T, c *Cluster) (masters, replicas int) {
	t.Helper()
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		rdb := goredis.NewClient(&goredis.Options{Network: "unix", Addr: n.Socket()})
		info, err := rdb.Info(context.Background(), "replication").Result()
		rdb.Close()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info, "role:master") {
			masters++
		} else {
			replicas++
		}
	}
	return masters, replicas
}

// StartCluster forms 3 masters with a replica each, every slot served; a
// killed master's replica takes over, and the killed node restarted
// rejoins as a replica.
func TestCluster_FormsAndFailsOver(t *testing.T) {
	c := StartCluster(t, ClusterOptions{NodeTimeout: time.Second})
	if m, r := roles(t, c); m != 3 || r != 3 {
		t.Fatalf("%d masters, %d replicas; want 3 and 3", m, r)
	}
	rdb := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs()})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	master, err := rdb.MasterForKey(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	node := c.Node(master.Options().Addr)
	node.Kill()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.WaitHealthy(wctx); err != nil {
		t.Fatal(err)
	}
	if m, r := roles(t, c); m != 3 || r != 2 {
		t.Fatalf("after the kill: %d masters, %d replicas; want 3 and 2", m, r)
	}
	node.Restart(t)
	if err := c.WaitHealthy(wctx); err != nil {
		t.Fatal(err)
	}
	if m, r := roles(t, c); m != 3 || r != 3 {
		t.Fatalf("after the restart: %d masters, %d replicas; want 3 and 3", m, r)
	}
	if !strings.HasPrefix(c.URL(), "redis+cluster://127.0.0.1:") || len(strings.Split(c.URL(), ",")) != 6 {
		t.Fatalf("URL %s", c.URL())
	}
}
