// Command dsbench measures a Durable Streams server with one Go client, the
// same for every server, so that runhub (/v1/stream/* of the hub) and
// another implementation (the Caddy plugin of the durable-streams project)
// can be compared round by round.
//
// Its scenarios are those of the protocol's own benchmark package
// (packages/benchmarks of the durable-streams repository, not published on
// npm), with the same sizes:
//
//   - latency: an application/octet-stream stream is created, one 100-byte
//     append is read back (warm-up), then a live=long-poll read is parked
//     at the tail (after a 2 ms pause, so that it waits on the server) and
//     another 100-byte append is sent; the figure is from the append's
//     start until both its answer and the read's data are in, as the
//     package's "Total RTT". Each iteration uses a new stream, deleted
//     after.
//   - small: 1,000 appends of 100 bytes to one stream, 75 at a time (a
//     batch waits for all 75 before the next); messages per second.
//   - large: 50 appends of 1 MiB, 15 at a time; messages and MiB per
//     second.
//
// Every append the servers acknowledge is checked afterwards: the stream's
// length must be the sum of the appends (no append lost or doubled).
//
// With -url it measures one server already running. With -hub-bin and
// -caddy-bin it starts each in turn, on a fresh data directory (on the
// disk of -dir; both servers fsync before acknowledging an append), in
// alternated rounds (hub, caddy, hub, caddy, …; -anchor-bin adds an
// earlier runhub build, first in every round), and prints a markdown
// table of every round and the medians. Load tests only ever target
// 127.0.0.1.
package main
