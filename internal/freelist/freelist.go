// Package freelist keeps values for reuse in a bounded stack guarded by a
// mutex: the store's big buffers (sstable's read-ahead windows and write
// buffers, the memtable's chunks) that are too costly to allocate and
// zero again, and that a sync.Pool would lose at every collection. The
// bound caps the memory kept when many are released at once; the last
// value put is the first handed out again, while it is likely in cache.
package freelist

import "sync"

// List is a free list that keeps at most as many values as New was given.
// The zero List keeps nothing; use New. It is safe for concurrent use.
type List[T any] struct {
	max  int
	mu   sync.Mutex
	free []T
}

// New returns a List that keeps at most max values (none if max <= 0).
func New[T any](max int) *List[T] {
	return &List[T]{max: max}
}

// Get takes the value put last; false if the list is empty.
func (l *List[T]) Get() (T, bool) {
	var zero T
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.free)
	if n == 0 {
		return zero, false
	}
	v := l.free[n-1]
	l.free[n-1] = zero // the list no longer refers to it
	l.free = l.free[:n-1]
	return v, true
}

// Put keeps v unless the list is at its bound already; it reports whether
// v was kept (if not, the caller drops it).
func (l *List[T]) Put(v T) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.free) >= l.max {
		return false
	}
	l.free = append(l.free, v)
	return true
}

// Len is the number of values kept now.
func (l *List[T]) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.free)
}
