// Command loadtest drives a hub on this machine with many tab sockets and
// simulated runs and reports what it delivered: connections held, connect
// time, events per second, end-to-end latency (created_at to receipt),
// bytes per tab, duplicates and gaps, replay time on focus switches, and the
// hub's CPU and memory read from /proc.
//
// It only ever talks to loopback addresses (127.0.0.0/8, ::1): a target
// that resolves to anything else is refused. Every phase is bounded in
// count and time, and the program stops by itself.
//
// See loadtest/README.md for the flags, the scenarios and how to read the
// report; `make loadtest` runs the standard scenario against a hub it
// spawns. -floor spawns loadtest/floorhub instead: a server that only
// writes each event to its sockets, the floor the hub is compared with;
// -floor-journal makes it journal each event first (one write and one
// fdatasync per batch), the floor with a journal.
package main
