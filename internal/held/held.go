// Package held keeps a value for as long as a byte slice is live, to be
// found again by that slice: what a decoder made of bytes it wrote itself,
// so that the next read of the same bytes need not decode them.
package held

import (
	"hash/maphash"
	"runtime"
	"sync"
	"weak"
)

// Map holds values by the bytes they go with. An entry goes when its bytes
// are garbage (it does not keep them live), or when Take returns it. It is
// safe for concurrent use; the zero value is empty and ready, and holds
// any number of values.
type Map[T any] struct {
	// Max is the most values held at once (0: no bound); a Put beyond it
	// holds nothing.
	Max   int
	mu    sync.Mutex
	m     map[weak.Pointer[byte]]entry[T]
	dropK func(weak.Pointer[byte]) // drop, made once with m (a method value made in each Put would be an allocation)
	seed  maphash.Seed             // what entries' sums are hashed with, made once with m
}

// entry is a value and what identifies the bytes it was put with: their
// array (the key), length and hash, so that bytes changed in place since
// are not taken for them.
type entry[T any] struct {
	v   T
	n   int
	sum uint64
}

// MinLen is the shortest slice Put holds a value for: a smaller allocation
// may share its block with others, and then it may never be collected
// alone (runtime.AddCleanup).
const MinLen = 16

// Put holds v for b, whose first byte must be the first of its allocation
// (a slice made, or cloned, for it), until b is garbage or Take returns it.
// A b shorter than MinLen is not held, nor is any beyond Max.
func (h *Map[T]) Put(b []byte, v T) {
	if len(b) < MinLen {
		return
	}
	k := weak.Make(&b[0])
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.Max > 0 && len(h.m) >= h.Max {
		return
	}
	if h.m == nil {
		h.m, h.dropK, h.seed = map[weak.Pointer[byte]]entry[T]{}, h.drop, maphash.MakeSeed()
	}
	h.m[k] = entry[T]{v: v, n: len(b), sum: maphash.Bytes(h.seed, b)}
	runtime.AddCleanup(&b[0], h.dropK, k)
}

// Take returns the value held for b and forgets it; false when none is
// (never held, taken before, or b is not the slice it was held for, or no
// longer holds the same bytes).
func (h *Map[T]) Take(b []byte) (v T, ok bool) {
	if len(b) < MinLen {
		return v, false
	}
	k := weak.Make(&b[0])
	h.mu.Lock()
	e, ok := h.m[k]
	delete(h.m, k)
	seed := h.seed
	h.mu.Unlock()
	if !ok || e.n != len(b) || e.sum != maphash.Bytes(seed, b) {
		return v, false
	}
	return e.v, true
}

// Len is the number of values held.
func (h *Map[T]) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.m)
}

func (h *Map[T]) drop(k weak.Pointer[byte]) {
	h.mu.Lock()
	delete(h.m, k)
	h.mu.Unlock()
}
