package hub

import (
	"cmp"
	"slices"
	"unsafe"
)

// Sorted sets: the methods of connSet (types.go), a slice of sockets
// sorted by their addresses, which never change (the collector does not
// move heap objects); and mergeIDs, for the sorted session ids a socket
// watches (watches.ids, which presence shares).

func connOrder(a, b *conn) int {
	return cmp.Compare(uintptr(unsafe.Pointer(a)), uintptr(unsafe.Pointer(b)))
}

// has reports whether c is in s.
func (s connSet) has(c *conn) bool {
	_, ok := slices.BinarySearchFunc(s, c, connOrder)
	return ok
}

// add puts c in s.
func (s *connSet) add(c *conn) {
	if i, ok := slices.BinarySearchFunc(*s, c, connOrder); !ok {
		*s = slices.Insert(*s, i, c)
	}
}

// remove takes c out of s.
func (s *connSet) remove(c *conn) {
	if i, ok := slices.BinarySearchFunc(*s, c, connOrder); ok {
		*s = slices.Delete(*s, i, i+1) // clears the freed slot
	}
}

// mergeIDs returns the sorted ids of have (sorted) and add, in a slice of
// their size: a socket keeps it for its life.
func mergeIDs(have, add []string) []string {
	out := make([]string, len(have), len(have)+len(add))
	copy(out, have)
	for _, id := range add {
		if _, found := slices.BinarySearch(have, id); !found {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return slices.Clip(out)
}
