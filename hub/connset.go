package hub

import (
	"cmp"
	"slices"
	"unsafe"
)

// The methods of connSet (types.go): a slice of sockets sorted by their
// addresses, which never change (the collector does not move heap
// objects).

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
