package executor_test

import (
	"testing"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/adaptertest"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/journal/mem"
)

// TestConformance runs the RuntimeAdapter conformance suite in-process:
// one executor over an in-memory journal, behind the Router as the
// hub uses it; the journal counts the metas read.
func TestConformance(t *testing.T) {
	adaptertest.Run(t, func(t *testing.T, s adaptertest.Setup) adaptertest.Harness {
		store := mem.New(mem.Options{})
		log, _ := drivertest.Logger()
		metas := &adaptertest.MetaCounter{}
		counted := metas.Wrap(store)
		exec := executor.New(counted, executor.Options{Drivers: s.Drivers, DefaultDriver: s.DefaultDriver, Capabilities: s.Capabilities, Logger: log})
		t.Cleanup(func() {
			exec.Close()
			store.Close()
		})
		return adaptertest.Harness{Adapter: adapter.NewRouter(counted, exec, nil), Metas: metas}
	})
}
