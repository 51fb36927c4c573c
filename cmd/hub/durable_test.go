package main

import (
	"context"
	"strings"
	"testing"

	"github.com/runhub/runhub/journal"
)

// The edge's settings: defaults, and bad values refused naming the
// setting.
func TestParseServeConfig_Durable(t *testing.T) {
	cfg, err := parseServeConfig(nil, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Durable
	if d.LongPollTimeout.Seconds() != 20 || d.SSEMaxDuration.Seconds() != 60 || d.MaxStreamBytes != 64<<20 ||
		d.MaxAppendBytes != 8<<20 || d.MaxReadBytes != 1<<20 || d.CORSOrigins != "" {
		t.Fatalf("defaults: %+v", d)
	}
	for k, v := range map[string]string{
		"RUNHUB_STREAM_LONG_POLL_TIMEOUT": "0s",
		"RUNHUB_STREAM_MAX_BYTES":         "-1",
		"RUNHUB_STREAM_MAX_APPEND_BYTES":  "999999999",
	} {
		if _, err := parseServeConfig(nil, envOf(map[string]string{k: v})); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: %v, want an error naming it", k, v, err)
		}
	}
}

// The edge is built over the embedded journal's own streams.
func TestDurableEdge_EmbeddedJournal(t *testing.T) {
	cfg, err := parseServeConfig(nil, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Data = t.TempDir()
	rt, err := openRuntime(context.Background(), cfg.RuntimeConfig, quietLog(), "", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.close()
	if edge := durableEdge(cfg.Durable, rt); edge == nil {
		t.Fatal("no Durable Streams edge over the embedded journal")
	}
	ss := rt.outbox.(journal.StreamHolder).Streams(journal.StreamLimits{})
	if _, created, err := ss.CreateStream(context.Background(), "s", journal.StreamCreate{ContentType: "text/plain"}); err != nil || !created {
		t.Fatalf("a stream in the process's journal: %v %v", created, err)
	}
}
