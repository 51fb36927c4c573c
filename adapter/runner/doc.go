// Package runner moves run execution out of the hub process, over Redis:
// hubs dispatch begun runs to a run queue (a stream with the consumer group
// "runners"); any number of runner processes take them, each run by
// exactly one, and own each with a lease they renew; controls reach a run's
// executor through its node's control stream and come back on a reply list;
// every process runs a reaper that ends a run whose lease expired with one
// terminal error "interrupted" (the journal's single-terminal rule makes
// that exactly once however many processes notice).
//
// Keys (prefix as the journal's, default "rh:"):
//
//	rh:runq                 stream  run queue; group "runners"; fields run, session
//	rh:run:{RID}:lease      string  the owning node's id, PX lease TTL
//	rh:node:{<id>}:ctl      stream  a node's inbox: controls for its runs: run,
//	                                control (JSON: the adapter.Control and the run's
//	                                meta as the sender read it), reply; deleted when
//	                                the node stops, else expires 1 h after its last
//	                                control
//	rh:reply:<id>           list    one control's answer (a ControlResult), expires
//	rh:node:{<id>}:wake     stream  wakes a node's control listener (same hash tag
//	                                as its inbox); deleted when the node stops, else
//	                                expires after a day
//	rh:runners              zset    the runners' heartbeats: node id scored by the
//	                                Unix ms of its last (every LeaseTTL/3); removed
//	                                when the runner stops, trimmed after a day
//
// Every command and transaction touches one key, or keys of one hash tag:
// the package runs on a Redis Cluster as on a single Redis (Config.Client
// a *goredis.ClusterClient). The queue read that StopConsuming unblocks is
// issued on the master of the queue's slot.
//
// A node that finds one of its leases lapsed (it stalled, or was cut off
// from Redis, for longer than the TTL) stops that run at once: others have
// reaped it or will. A runner that stops consuming unblocks its queue read
// and hands back to the queue whatever it read but will not start.
//
// A Node is the executor side (an executor.InProcess plus its lease keeper,
// control listener, reaper and, in a runner, the queue consumer); Queue and
// Controls are what a dispatching hub plugs into executor.Options.Dispatch
// and adapter.NewRouter (its Remote). Every goroutine belongs to a Node and
// stops with it.
package runner
