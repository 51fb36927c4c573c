package driver_test

import (
	"fmt"
	"testing"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/protocol"
)

// Steer records the guidance before the driver can take it (so that the
// record precedes whatever the runtime answers), and records nothing when
// too much guidance is waiting.
func TestSteer_RecordedBeforeHandedOver(t *testing.T) {
	x := driver.NewExecution("r1", "s1", protocol.StartRunRequest{}, driver.ExecutionOptions{})
	n := 0
	for ; ; n++ {
		text := fmt.Sprint("g", n)
		recorded := false
		ok := x.Steer(text, func() {
			recorded = true
			if got := len(x.Steering()); got != n {
				t.Fatalf("steer %d: the driver holds %d before the record, want %d", n, got, n)
			}
		})
		if !ok {
			if recorded {
				t.Fatalf("steer %d: refused, but recorded", n)
			}
			break
		}
		if !recorded || len(x.Steering()) != n+1 {
			t.Fatalf("steer %d: recorded %v, %d waiting", n, recorded, len(x.Steering()))
		}
	}
	if n == 0 {
		t.Fatal("no guidance was taken")
	}
	for i := range n {
		if got := <-x.Steering(); got != fmt.Sprint("g", i) {
			t.Fatalf("guidance %d: %q", i, got)
		}
	}
}
