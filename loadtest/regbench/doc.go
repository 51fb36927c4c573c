// Command regbench measures what the size of the registry costs a hub on
// the embedded journal: for each registry size it seeds a fresh data
// directory with that many finished sessions (one sim-shaped run of three
// events each, written through the journal's own API, unsynced), starts
// `hub serve` on it and reports the start-up time (exec to /healthz 200)
// and resident memory, GET /v1/sessions (p50, p99, bytes) and one tab's
// watch of the protocol's limit of sessions (watch → every status).
//
//	go run ./loadtest/regbench -hub-bin /tmp/hub -sessions 10000,100000,1000000 -dir /root
//
// docs/benchmarks.md ("Cost curves") records its figures.
package main
