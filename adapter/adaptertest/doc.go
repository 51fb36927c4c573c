// Package adaptertest is the conformance suite of adapter.RuntimeAdapter:
// one set of tests every way of running runs (in-process over the
// embedded journal, runners over Redis) runs against itself, through the
// RuntimeAdapter interface only.
//
// A mode's test package calls Run with a function that builds a fresh
// adapter for each subtest, registering the suite's drivers (Setup) in
// every executor it builds and closing what it started in t.Cleanup:
//
//	func TestConformance(t *testing.T) {
//		adaptertest.Run(t, func(t *testing.T, s adaptertest.Setup) adaptertest.Harness {
//			store := openJournal(t)
//			exec := executor.New(store, executor.Options{Drivers: s.Drivers, DefaultDriver: s.DefaultDriver,
//				Capabilities: s.Capabilities})
//			t.Cleanup(func() { exec.Close() })
//			return adaptertest.Harness{Adapter: adapter.NewRouter(store, exec, nil)}
//		})
//	}
//
// The suite's Driver is scripted by the first word of a run's message
// (done, fail, block, deaf, approval, clarify, expire: see the Script
// constants); it records the runs it executes, so the suite finds runs the
// adapter starts on its own (a drained queue, a goal's continuation).
//
// The suite states the contract of every control: the ControlResult's
// status, Accepted, run and session ids and event id, the error of a fault
// (adapter.ErrNotFound, adapter.ErrConflict, a protocol bad_request), and
// the events journaled after it. The one difference between modes it
// knows is Harness.Dispatched: an adapter that hands its starts to another
// executor answers them queued, before run.started exists.
//
// Every wait is for an event or a recorded run, bounded by a timeout; no
// test sleeps for correctness. Subtests run one after another.
package adaptertest
