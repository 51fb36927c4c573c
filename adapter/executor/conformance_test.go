package executor_test

import (
	"path/filepath"
	"testing"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/adaptertest"
	"github.com/runhub/runhub/adapter/executor"
	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/journal/bolt"
)

// TestConformance runs the RuntimeAdapter conformance suite in-process:
// one executor over an embedded bolt journal, behind the Router as the
// hub uses it.
func TestConformance(t *testing.T) {
	adaptertest.Run(t, func(t *testing.T, s adaptertest.Setup) adaptertest.Harness {
		store, err := bolt.Open(filepath.Join(t.TempDir(), "journal.db"), bolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		log, _ := drivertest.Logger()
		exec := executor.New(store, executor.Options{Drivers: s.Drivers, DefaultDriver: s.DefaultDriver, Logger: log})
		t.Cleanup(func() {
			exec.Close()
			store.Close()
		})
		return adaptertest.Harness{Adapter: adapter.NewRouter(store, exec, nil)}
	})
}
