package keyedlock

import (
	"sync"
	"testing"
)

// One key is held by one at a time, other keys are not held up, and no
// entry outlives its holders.
func TestMutex(t *testing.T) {
	var k Mutex
	unlockA := k.Lock("a")
	unlockB := k.Lock("b") // another key: not held up
	got := make(chan struct{})
	go func() {
		unlock := k.Lock("a")
		close(got)
		unlock()
	}()
	select {
	case <-got:
		t.Fatal("a second holder of key a while the first holds it")
	default:
	}
	unlockB()
	unlockA()
	<-got
	var wg sync.WaitGroup
	counter := 0
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock := k.Lock("c")
			counter++ // the race detector fails this without the lock
			unlock()
		}()
	}
	wg.Wait()
	if counter != 50 {
		t.Fatalf("counter %d", counter)
	}
	if n := k.held(); n != 0 {
		t.Fatalf("%d entries left with no holder", n)
	}
}
