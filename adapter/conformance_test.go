package adapter_test

import (
	"path/filepath"
	"testing"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/adaptertest"
	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/journal/bolt"
)

// TestConformance runs the RuntimeAdapter conformance suite in-process:
// one executor over an embedded bolt journal.
func TestConformance(t *testing.T) {
	adaptertest.Run(t, func(t *testing.T, s adaptertest.Setup) adaptertest.Harness {
		store, err := bolt.Open(filepath.Join(t.TempDir(), "journal.db"), bolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		log, _ := drivertest.Logger()
		a := adapter.NewInProcess(store, adapter.Options{Drivers: s.Drivers, DefaultDriver: s.DefaultDriver, Logger: log})
		t.Cleanup(func() {
			a.Close()
			store.Close()
		})
		return adaptertest.Harness{Adapter: a}
	})
}
