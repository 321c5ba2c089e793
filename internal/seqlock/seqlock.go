// Package seqlock is a sequence lock: data that one writer at a time
// changes in place and many readers read without taking a lock. A writer
// makes the sequence odd while it writes; a reader notes the sequence,
// reads, and keeps what it read only if the sequence did not move. A
// reader that keeps overlapping writes does not give up with a guess: it
// waits for the write in progress, whose critical section is only
// the stores that publish a change.
//
// Every word the readers read must be read and written with sync/atomic:
// a reader may see a torn state, which it discards, and must not fault on
// it.
package seqlock

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Tries is how many lock-free reads a reader attempts before it holds
// off the writers (Read).
const Tries = 8

// Lock is a sequence lock. The zero value is ready to use.
type Lock struct {
	seq atomic.Uint64
	// mu is held by a writer while it publishes, and by a reader that
	// gave up on lock-free reads.
	mu sync.Mutex
}

// BeginWrite starts publishing a change (writers wait for each other);
// readers that overlap it retry. EndWrite ends the change.
func (l *Lock) BeginWrite() {
	l.mu.Lock()
	l.seq.Add(1)
}

// EndWrite ends the change BeginWrite started.
func (l *Lock) EndWrite() {
	l.seq.Add(1)
	l.mu.Unlock()
}

// Seq returns the number of changes published so far times two (plus
// one while a change is being published): a counter writers may use as
// a source of variation that the same history reproduces.
func (l *Lock) Seq() uint64 { return l.seq.Load() }

// Read returns read's result from a state no write overlapped: up to
// Tries lock-free attempts (a write in progress yields the processor),
// then one with the writers held off. read must not block and must
// tolerate a torn state (its result is then discarded).
func Read[T any](l *Lock, read func() T) T {
	for range Tries {
		if s, ok := l.Begin(); ok {
			v := read()
			if l.Valid(s) {
				return v
			}
		}
		runtime.Gosched()
	}
	l.mu.Lock() // waits for the write in progress; holds off the next
	defer l.mu.Unlock()
	return read()
}

// Begin starts a lock-free read: it returns the sequence to check the
// read against (Valid), and false while a write is in progress. A hot path
// makes its first try inline with Begin and Valid and calls Read only when
// that try fails, so the common case costs no call.
func (l *Lock) Begin() (uint64, bool) {
	s := l.seq.Load()
	return s, s&1 == 0
}

// Valid reports whether no write overlapped a read that Begin started at s.
func (l *Lock) Valid(s uint64) bool { return l.seq.Load() == s }
