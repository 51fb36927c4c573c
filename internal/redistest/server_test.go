package redistest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

func client(t *testing.T, s *Server) *goredis.Client {
	t.Helper()
	opt, err := goredis.ParseURL(s.URL())
	if err != nil {
		t.Fatalf("ParseURL(%q): %v", s.URL(), err)
	}
	opt.MaxRetries = -1
	c := goredis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestStart_PingAndNoPersistence(t *testing.T) {
	s := Start(t, Options{})
	if len(s.Socket()) > 100 {
		t.Errorf("socket path %q is too long for a unix socket", s.Socket())
	}
	ctx := context.Background()
	c := client(t, s)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	cfg, err := c.ConfigGet(ctx, "appendonly").Result()
	if err != nil {
		t.Fatal(err)
	}
	if cfg["appendonly"] != "no" {
		t.Errorf("appendonly = %q, want no", cfg["appendonly"])
	}
	if cfg, _ := c.ConfigGet(ctx, "save").Result(); cfg["save"] != "" {
		t.Errorf("save = %q, want empty", cfg["save"])
	}
	if cfg, _ := c.ConfigGet(ctx, "port").Result(); cfg["port"] != "0" {
		t.Errorf("port = %q, want 0", cfg["port"])
	}
}

func TestRestart_AOFKeepsData(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := Start(t, Options{AOF: true, Dir: dir})
	ctx := context.Background()
	c := client(t, s)
	if err := c.XAdd(ctx, &goredis.XAddArgs{Stream: "st", ID: "1-1", Values: []any{"f", "v"}}).Err(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if s.Running() {
		t.Fatal("Running after Kill")
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING succeeded with the server killed")
	}
	s.Restart(t)
	if !s.Running() {
		t.Fatal("not Running after Restart")
	}
	var n int64
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if n, err = c.XLen(ctx, "st").Result(); err == nil {
			break
		}
	}
	if err != nil || n != 1 {
		t.Fatalf("after restart XLEN = %d, %v; want 1 (AOF)", n, err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("dir: %v", err)
	}
	s.Stop()
	s.Stop() // idempotent
}

func TestRestart_WithoutAOFLosesData(t *testing.T) {
	s := Start(t, Options{})
	ctx := context.Background()
	c := client(t, s)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	url := s.URL()
	s.Restart(t)
	if s.URL() != url {
		t.Fatalf("URL changed across Restart: %q → %q", url, s.URL())
	}
	var n int64
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if n, err = c.Exists(ctx, "k").Result(); err == nil {
			break
		}
	}
	if err != nil || n != 0 {
		t.Fatalf("EXISTS after restart = %d, %v; want 0", n, err)
	}
}

func TestClose_RemovesTempDir(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	sock := s.Socket()
	s.Close()
	if _, err := os.Stat(filepath.Dir(sock)); !os.IsNotExist(err) {
		t.Fatalf("temp dir still there after Close: %v", err)
	}
}

func TestNew_MissingBinaryFails(t *testing.T) {
	t.Setenv("REDIS_SERVER", filepath.Join(t.TempDir(), "no-such-redis-server"))
	if _, err := New(Options{}); err == nil {
		t.Fatal("New succeeded with a missing binary")
	}
}
