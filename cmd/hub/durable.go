package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/durable"
	"github.com/runhub/runhub/journal"
)

// The Durable Streams edge (hub/durable, docs/durable-streams.md): its
// settings, and the edge built over the process's journal (edges.go
// lists it).

// DurableConfig is the edge's configuration.
type DurableConfig struct {
	LongPollTimeout time.Duration // RUNHUB_STREAM_LONG_POLL_TIMEOUT, -stream-long-poll-timeout: how long a live=long-poll read waits (default 20s)
	SSEMaxDuration  time.Duration // RUNHUB_STREAM_SSE_MAX_DURATION, -stream-sse-max-duration: how long one live=sse answer lasts (default 60s)
	MaxStreamBytes  int           // RUNHUB_STREAM_MAX_BYTES, -stream-max-bytes: bound of a stream's data (default 64 MiB)
	MaxAppendBytes  int           // RUNHUB_STREAM_MAX_APPEND_BYTES, -stream-max-append-bytes: bound of one append or create body (default 8 MiB)
	MaxReadBytes    int           // RUNHUB_STREAM_MAX_READ_BYTES, -stream-max-read-bytes: bound of one read answer's data (default 1 MiB)
	CORSOrigins     string        // RUNHUB_STREAM_CORS_ORIGINS, -stream-cors-origins: comma-separated origins a browser may call the streams from ("*": any; default none)
	SubsPerOwner    int           // RUNHUB_STREAM_SUBSCRIPTIONS_PER_OWNER, -stream-subscriptions-per-owner: bound of one subject's subscriptions (default 100)
	SubStreams      int           // RUNHUB_STREAM_SUBSCRIPTION_STREAMS, -stream-subscription-streams: bound of the streams one subscription links (default 1000)
	WebhookTimeout  time.Duration // RUNHUB_STREAM_WEBHOOK_TIMEOUT, -stream-webhook-timeout: bound of one subscription webhook delivery (default 10s)
}

// durable defines the edge's flags.
func (f *flagSet) durable(c *DurableConfig) {
	f.dur(&c.LongPollTimeout, "stream-long-poll-timeout", "RUNHUB_STREAM_LONG_POLL_TIMEOUT", "20s", "Durable Streams: how long a live=long-poll read waits for data before 204 (docs/durable-streams.md)")
	f.dur(&c.SSEMaxDuration, "stream-sse-max-duration", "RUNHUB_STREAM_SSE_MAX_DURATION", "60s", "Durable Streams: how long one live=sse answer lasts before the server ends it and the client reconnects")
	f.int(&c.MaxStreamBytes, "stream-max-bytes", "RUNHUB_STREAM_MAX_BYTES", 64<<20, "Durable Streams: bound of one stream's data; an append past it is refused with 413")
	f.int(&c.MaxAppendBytes, "stream-max-append-bytes", "RUNHUB_STREAM_MAX_APPEND_BYTES", 8<<20, "Durable Streams: bound of one append's (or create's) body; a larger one is refused with 413")
	f.int(&c.MaxReadBytes, "stream-max-read-bytes", "RUNHUB_STREAM_MAX_READ_BYTES", 1<<20, "Durable Streams: bound of one read answer's data (a read returns at least one append)")
	f.str(&c.CORSOrigins, "stream-cors-origins", "RUNHUB_STREAM_CORS_ORIGINS", "", "Durable Streams: comma-separated browser origins allowed to call /v1/stream/* cross-origin (*: any; empty: none, the hub's origin check applies)")
	f.int(&c.SubsPerOwner, "stream-subscriptions-per-owner", "RUNHUB_STREAM_SUBSCRIPTIONS_PER_OWNER", 100, "Durable Streams: bound of one subject's subscriptions; a registration past it is refused with 409 SUBSCRIPTION_LIMIT_EXCEEDED")
	f.int(&c.SubStreams, "stream-subscription-streams", "RUNHUB_STREAM_SUBSCRIPTION_STREAMS", 1000, "Durable Streams: bound of the streams one subscription links (explicit and matched by its pattern); past it a registration is refused with 400")
	f.dur(&c.WebhookTimeout, "stream-webhook-timeout", "RUNHUB_STREAM_WEBHOOK_TIMEOUT", "10s", "Durable Streams: bound of one subscription webhook POST; a slower receiver's wake is retried with backoff")
}

// check validates the edge's settings.
func (c *DurableConfig) check(f *flagSet) error {
	for name, d := range map[string]time.Duration{"stream-long-poll-timeout": c.LongPollTimeout, "stream-sse-max-duration": c.SSEMaxDuration} {
		if d <= 0 {
			return fmt.Errorf("%s %v: want a positive duration", f.source(name), d)
		}
	}
	for name, n := range map[string]int{"stream-max-bytes": c.MaxStreamBytes, "stream-max-append-bytes": c.MaxAppendBytes, "stream-max-read-bytes": c.MaxReadBytes} {
		if n <= 0 {
			return fmt.Errorf("%s %d: want a positive number of bytes", f.source(name), n)
		}
	}
	for name, n := range map[string]int{"stream-subscriptions-per-owner": c.SubsPerOwner, "stream-subscription-streams": c.SubStreams} {
		if n <= 0 {
			return fmt.Errorf("%s %d: want a positive number", f.source(name), n)
		}
	}
	if c.WebhookTimeout <= 0 {
		return fmt.Errorf("%s %v: want a positive duration", f.source("stream-webhook-timeout"), c.WebhookTimeout)
	}
	if c.MaxAppendBytes > c.MaxStreamBytes {
		return fmt.Errorf("%s %d: more than %s %d", f.source("stream-max-append-bytes"), c.MaxAppendBytes, f.source("stream-max-bytes"), c.MaxStreamBytes)
	}
	return nil
}

// durableEdge is the edge over the process's journal (the backend
// itself: rt.outbox holds it without the decorators, which hold no
// streams). Both journals hold streams; one that held none would leave
// the edge off.
func durableEdge(cfg DurableConfig, rt *procRuntime) hub.Edge {
	holder, ok := rt.outbox.(journal.StreamHolder)
	if !ok {
		return nil
	}
	var origins []string
	for _, o := range strings.Split(cfg.CORSOrigins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			origins = append(origins, o)
		}
	}
	var docs journal.Docs // the subscriptions' state: both journals keep documents
	if dh, ok := rt.outbox.(journal.DocHolder); ok {
		docs = dh.Docs()
	}
	return durable.New(durable.Options{
		Docs:                      docs,
		MaxSubscriptionsPerOwner:  cfg.SubsPerOwner,
		MaxStreamsPerSubscription: cfg.SubStreams,
		WebhookTimeout:            cfg.WebhookTimeout,
		Streams:                   holder.Streams(journal.StreamLimits{MaxStreamBytes: int64(cfg.MaxStreamBytes)}),
		LongPollTimeout:           cfg.LongPollTimeout,
		SSEMaxDuration:            cfg.SSEMaxDuration,
		MaxAppendBytes:            int64(cfg.MaxAppendBytes),
		MaxReadBytes:              cfg.MaxReadBytes,
		CORSOrigins:               origins,
	})
}
