package agui

import (
	"testing"

	"go.uber.org/goleak"
)

// No goroutine outlives the tests: a run's request, its stream reader and
// its timers end with it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
