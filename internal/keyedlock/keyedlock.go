// Package keyedlock is a mutex per key whose entries live only while
// someone holds or waits for them.
package keyedlock

import "sync"

// Mutex is a mutex per key. The zero value is ready to use.
type Mutex struct {
	mu    sync.Mutex
	locks map[string]*entry
}

type entry struct {
	mu   sync.Mutex
	refs int
}

// Lock locks key and returns its unlock; the key's entry is forgotten
// when the last holder or waiter unlocks.
func (k *Mutex) Lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*entry{}
	}
	e := k.locks[key]
	if e == nil {
		e = &entry{}
		k.locks[key] = e
	}
	e.refs++
	k.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}

// held is how many keys have an entry (tests).
func (k *Mutex) held() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.locks)
}
